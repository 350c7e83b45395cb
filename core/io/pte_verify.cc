// repair_pte's proof: the temporary output re-read as a new input (header, Verifier,
// every segment, key and payload located again) and every byte of it compared with
// what the plan says it must be, before it is committed.
#include <cstring>

#include "core/base/proof_seam.h"
#include "core/io/pte_repair_internal.h"
#include "core/base/sha.h"

namespace machofix::pte_internal {

namespace {

// The new bytes are what was meant (the copies are CopyChecker's job).
void compare_new_bytes(const Bytes& output, const Plan& plan) {
  for (const Piece& piece : plan.pieces) {
    if (piece.in_at) continue;
    Bytes written = output.sub(piece.out_at, piece.length, "output range");
    Bytes expected(piece.bytes);
    if (std::memcmp(written.data(), expected.data(), piece.length) != 0)
      fail_at(written.base() + first_difference(written.data(), expected.data(), 0, piece.length).value_or(0),
              "the output differs from the bytes written there");
  }
}

void check_header_after(const Container& before, const Container& after, const Plan& plan) {
  if (after.kind != before.kind || after.header.length != before.header.length ||
      after.header.flatbuffer_end != before.header.flatbuffer_end || after.header.base != before.header.base)
    fail_at(0, "the header does not describe the flatbuffer and segments as the input's did");
  std::optional<uint64_t> expected = plan.new_segment_data_size ? plan.new_segment_data_size : before.header.segment_data_size;
  if (after.header.segment_data_size != expected)
    fail_at(after.header.segment_data_size_at.value_or(0), "segment_data_size is not the one written");
}

void check_segments_after(const Container& before, const Container& after, const Plan& plan) {
  if (after.segments.size() != before.segments.size()) fail_at(0, "the number of segments changed");
  for (uint32_t i = 0; i < after.segments.size(); ++i) {
    if (after.segment_start(i) != plan.new_offsets[i] || after.segments[i].size != plan.new_sizes[i])
      fail_at(after.segments[i].table_at, "segment " + std::to_string(i) + " is at [" + hex(after.segment_start(i)) + ", +" +
                                              hex(after.segments[i].size) + "), not at [" + hex(plan.new_offsets[i]) + ", +" +
                                              hex(plan.new_sizes[i]) + ")");
  }
}

void check_names_after(const Container& before, const Container& after, const Plan& plan) {
  if (after.named.size() != before.named.size() || after.delegates.size() != before.delegates.size() ||
      after.inline_data.size() != before.inline_data.size() || after.methods != before.methods)
    fail_at(0, "the methods, named data or delegates are not the input's");
  for (size_t i = 0; i < after.named.size(); ++i) {
    if (after.named[i].key != plan.new_keys[i] || after.named[i].segment_index != before.named[i].segment_index)
      fail_at(after.named[i].table_at, "named data " + std::to_string(i) + " reads '" + after.named[i].key + "', not '" +
                                           plan.new_keys[i] + "'");
  }
  for (size_t i = 0; i < after.delegates.size(); ++i) {
    if (after.delegates[i].inline_data != before.delegates[i].inline_data || after.delegates[i].index != before.delegates[i].index)
      fail_at(after.delegates[i].table_at, "delegate " + std::to_string(i) + " refers to other data than in the input");
  }
}

// Each rewritten blob is exactly what prune produced, and each renewed key is the
// SHA-256 of the bytes it now names, in NamedData and in the delegate payloads.
void check_blobs_after(const Container& before, const Container& after, const Plan& plan) {
  for (const BlobJob& job : plan.blobs) {
    if (!job.changed) continue;
    Bytes written = after.segment_bytes(job.segment_index);
    Bytes expected = job.result.output.bytes();
    if (written.size() != expected.size() || first_difference(written.data(), expected.data(), 0, expected.size()))
      fail_at(written.base(), "segment " + std::to_string(job.segment_index) + " is not the rewritten Mach-O image");
    std::string hash = sha256_hex(written);
    for (size_t i = 0; i < after.named.size(); ++i) {
      const std::string& key = after.named[i].key;
      if (after.named[i].segment_index != job.segment_index || key == before.named[i].key) continue;
      if (!is_content_hash_key(key, hash))
        fail_at(after.named[i].key_at, "renewed key '" + key + "' is not the blob's SHA-256 " + hash);
    }
  }
}

void check_payloads_after(const Container& before, const Container& after, const Plan& plan) {
  for (size_t d = 0; d < after.delegates.size(); ++d) {
    std::vector<PayloadLine> old_lines = payload_lines(before.payload(before.delegates[d]));
    std::vector<PayloadLine> new_lines = payload_lines(after.payload(after.delegates[d]));
    if (old_lines.size() != new_lines.size()) fail_at(after.payload(after.delegates[d]).base(), "a delegate payload changed form");
    for (size_t l = 0; l < new_lines.size(); ++l) {
      std::string expected = old_lines[l].text;
      for (size_t i = 0; i < before.named.size(); ++i)
        if (before.named[i].key == expected) expected = plan.new_keys[i];
      if (new_lines[l].text != expected)
        fail_at(new_lines[l].at, "the delegate payload names '" + new_lines[l].text + "', not '" + expected + "'");
    }
  }
}

// What an AOTI backend resolves in the output: the entries it found in the input,
// under their renewed keys (the runtime's rules ran on the output as it was re-read).
void check_resolutions_after(const Container& before, const Container& after, const Plan& plan) {
  if (after.resolutions.size() != before.resolutions.size()) fail_at(0, "the AOTI delegates are not the input's");
  for (size_t i = 0; i < after.resolutions.size(); ++i) {
    const KeyResolution &old_keys = before.resolutions[i], &new_keys = after.resolutions[i];
    uint64_t at = after.delegates[new_keys.delegate].table_at;
    if (new_keys.so_named != old_keys.so_named || new_keys.weights_named != old_keys.weights_named)
      fail_at(at, "an AOTI delegate finds other named data than in the input");
    if (new_keys.so_key != plan.new_keys[*old_keys.so_named])
      fail_at(at, "an AOTI delegate names '" + new_keys.so_key + "', not '" + plan.new_keys[*old_keys.so_named] + "'");
    if (old_keys.weights_named && new_keys.weights_key != plan.new_keys[*old_keys.weights_named])
      fail_at(at, "an AOTI delegate names the weights '" + new_keys.weights_key + "', not '" + plan.new_keys[*old_keys.weights_named] + "'");
  }
}

// A delegate payload segment (small: payload_lines reads at most 4 KiB) must be
// the input with the patches applied.
void check_patched_segment(const Container& before, const Container& after, const Plan& plan, uint32_t index) {
  Bytes original = before.segment_bytes(index);
  std::vector<uint8_t> expected(original.data(), original.data() + original.size());
  for (const Patch& patch : plan.patches) {
    if (patch.at < original.base() || patch.at + patch.bytes.size() > original.base() + original.size()) continue;
    std::copy(patch.bytes.begin(), patch.bytes.end(), expected.begin() + (patch.at - original.base()));
  }
  Bytes written = after.segment_bytes(index);
  if (written.size() != expected.size() || std::memcmp(written.data(), expected.data(), expected.size()) != 0)
    fail_at(written.base(), "delegate payload segment " + std::to_string(index) + " is not the input with its keys renewed");
}

// An unchanged segment is proven identical when the pieces copy all its bytes to
// where the output's flatbuffer now locates it: CopyChecker has checked every
// copy byte for byte. A segment with patches (a delegate payload) must be the input
// with the patches applied.
void check_unchanged_segments(const Container& before, const Container& after, const Plan& plan) {
  for (uint32_t i = 0; i < before.segments.size(); ++i) {
    bool rewritten = std::any_of(plan.blobs.begin(), plan.blobs.end(),
                                 [&](const BlobJob& job) { return job.changed && job.segment_index == i; });
    // A segment outside the file (one the runtime never loads) has no bytes to copy.
    if (rewritten || !before.segment_in_file(i)) continue;
    uint64_t start = before.segment_start(i), end = start + before.segments[i].size;
    if (start == end) continue;
    bool patched = std::any_of(plan.patches.begin(), plan.patches.end(),
                               [&](const Patch& patch) { return patch.at >= start && patch.at < end; });
    if (patched) {
      check_patched_segment(before, after, plan, i);
      continue;
    }
    int64_t delta = static_cast<int64_t>(plan.new_offsets[i]) - static_cast<int64_t>(start);
    uint64_t covered = 0;
    for (const Piece& piece : plan.pieces) {
      if (!piece.in_at) continue;
      uint64_t from = std::max(start, *piece.in_at), to = std::min(end, *piece.in_at + piece.length);
      if (from >= to) continue;
      if (static_cast<int64_t>(piece.out_at) - static_cast<int64_t>(*piece.in_at) != delta)
        fail_at(from, "segment " + std::to_string(i) + " is not copied to where the output locates it");
      covered += to - from;
    }
    if (covered != end - start) fail_at(start, "segment " + std::to_string(i) + " is not entirely copied to the output");
  }
}

}  // namespace

void verify_output(const Container& before, const Plan& plan, const std::string& temp_path, CopyChecker& checker) {
  seam::offer_file(seam::ProofStep::PteReread, temp_path, 0, plan.output_size);  // tests only
  MappedFile written(temp_path, SmallFile::Read);
  try {
    if (written.size() != plan.output_size)
      fail_at(written.size(), "the output is " + std::to_string(written.size()) + " bytes, not " + std::to_string(plan.output_size));
    Container after = read_container(written.bytes());
    check_header_after(before, after, plan);
    check_segments_after(before, after, plan);
    check_names_after(before, after, plan);
    check_blobs_after(before, after, plan);
    check_payloads_after(before, after, plan);
    check_resolutions_after(before, after, plan);
    check_unchanged_segments(before, after, plan);
    compare_new_bytes(written.bytes(), plan);
    checker.finish();
  } catch (Error& error) {
    // An output that does not read back as planned failed its proof; a failed read is
    // still the system's.
    if (error.kind() == ErrorKind::Malformed) error.as(ErrorKind::ProofFailed);
    throw error.in_part("verifying the output before committing it (offsets in the output)");
  }
}

}  // namespace machofix::pte_internal
