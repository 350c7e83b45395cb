// Command line of the test-only .pte/.ptd writer (see pte_writer.h).
//
//   pte_writer matrix BLOBDIR OUTDIR
//       every case of the test matrix, as OUTDIR/<case>.pte or .ptd
//   pte_writer big BLOBDIR OUT.pte WEIGHT_BYTES [SEGMENT_ALIGNMENT]
//       forward.so under a content-hash key, plus WEIGHT_BYTES of weights in one
//       segment (streamed: any size), for bench/pte_bench.sh
//   pte_writer wrap SO OUT.pte [hash|method]
//       one method "forward" whose AOTI .so is SO, stored as the Metal backend
//       stores it, with ExecuTorch 1.4+ content-hash keys (default) or 1.1-1.3
//       method-name keys; for samples/
//   pte_writer load-case CASE SO OUT.pte
//       one method "forward" whose AOTI .so is SO, made into a case of ExecuTorch's
//       load rules (tests/executorch/test_load_rule_cases.py): constant-segment-outside,
//       constant-segment-inside, named-data-without-segments, default-keys
//   pte_writer weights-case CASE SO OUT
//       one method "forward" whose AOTI .so is SO (content-hash keys), its weights
//       made into a case of check's missing-weights (tests/e2e/test_missing_weights.py):
//       in-file, empty-key, absent (the payload names weights the file lacks),
//       unreadable (their entry names a segment that is not there), ptd (OUT is the
//       .ptd that holds the weights `absent` lacks)
//
// BLOBDIR is what tests/pte/make_blobs.sh writes.
#include <cstdlib>
#include <iostream>

#include "tests/pte/pte_writer.h"

namespace {

int usage() {
  std::cerr << "usage: pte_writer matrix BLOBDIR OUTDIR\n"
               "       pte_writer big BLOBDIR OUT.pte WEIGHT_BYTES [SEGMENT_ALIGNMENT]\n"
               "       pte_writer wrap SO OUT.pte [hash|method]\n"
               "       pte_writer load-case CASE SO OUT.pte\n"
               "       pte_writer weights-case CASE SO OUT\n";
  return 2;
}

int write_matrix(const std::string& blob_directory, const std::string& out_directory) {
  for (const pte_test::Case& test_case : pte_test::matrix(pte_test::Blobs::load(blob_directory))) {
    std::string path = out_directory + "/" + test_case.name + (test_case.spec.ptd ? ".ptd" : ".pte");
    pte_test::write_file(test_case.spec, path);
    std::cout << path << "\n";
  }
  return 0;
}

int write_big(const std::string& blob_directory, const std::string& path, uint64_t weight_bytes, uint64_t alignment) {
  pte_test::Blobs blobs = pte_test::Blobs::load(blob_directory);
  pte_test::Spec spec = pte_test::aoti_spec(pte_test::Keys::Hash, {{"forward", &blobs.forward, 1}}, alignment);
  // The weights named in the payload stay small (their key is hashed from their
  // bytes); the bulk goes into one more named segment, streamed.
  spec.data.push_back({{}, weight_bytes, 16});
  spec.named.push_back({"bulk_weights_blob", spec.data.size() - 1});
  pte_test::write_file(spec, path);
  return 0;
}

int wrap(const std::string& so_path, const std::string& path, const std::string& keys) {
  if (keys != "hash" && keys != "method") return usage();
  std::vector<uint8_t> so = pte_test::read_file(so_path);
  pte_test::Keys generation = keys == "hash" ? pte_test::Keys::Hash : pte_test::Keys::Method;
  pte_test::write_file(pte_test::aoti_spec(generation, {{"forward", &so, 1}}), path);
  return 0;
}

// Cases of ExecuTorch's load rules, each a model written by 1.1-1.3 (method-name keys,
// an empty payload) changed in one place.
int load_case(const std::string& name, const std::string& so_path, const std::string& path) {
  std::vector<uint8_t> so = pte_test::read_file(so_path);
  pte_test::Spec spec = pte_test::aoti_spec(pte_test::Keys::Method, {{"forward", &so, 1}});
  // Segments: 0 the constant placeholder, 1 the .so, 2 the weights (the last).
  if (name == "constant-segment-outside" || name == "constant-segment-inside") {
    // Constants at offsets 0 and 16 of the weights' segment (Program::load loads the
    // constant segment whenever offsets holds more than the placeholder); outside:
    // that segment runs 1 MiB past the end of the file.
    spec.constant_offsets = {0, 16};
    spec.constant_segment_index = 2;
    if (name == "constant-segment-outside") spec.last_segment_extra_size = 1 << 20;
  } else if (name == "named-data-without-segments") {
    spec.segments_table = false;
  } else if (name == "default-keys") {
    // No compile spec "method_name": the backend looks up "so_blob" and "weights_blob".
    spec.methods[0].method_name_spec = false;
    spec.named[0].key = "so_blob";
    spec.named[1].key = "weights_blob";
  } else {
    return usage();
  }
  pte_test::write_file(spec, path);
  return 0;
}

// Cases of an AOTI delegate's weights, each a model written by 1.4+ (content-hash keys,
// the payload "so_key\nweights_key") changed in one place. named[1] is the weights.
int weights_case(const std::string& name, const std::string& so_path, const std::string& path) {
  std::vector<uint8_t> so = pte_test::read_file(so_path);
  pte_test::Spec spec = pte_test::aoti_spec(pte_test::Keys::Hash, {{"forward", &so, 1}});
  std::string& payload = spec.methods[0].payload;
  std::string weights_key = payload.substr(payload.find('\n') + 1);
  if (name == "empty-key") {
    payload.resize(payload.find('\n') + 1);
  } else if (name == "absent") {
    spec.named.pop_back();
    spec.data.pop_back();
  } else if (name == "unreadable") {
    spec.named[1].segment_index = 99;
  } else if (name == "ptd") {
    pte_test::Spec ptd;
    ptd.ptd = true;
    ptd.segment_alignment = 16;
    ptd.data = {spec.data[spec.named[1].data]};
    ptd.named = {{weights_key, 0}};
    spec = ptd;
  } else if (name != "in-file") {
    return usage();
  }
  pte_test::write_file(spec, path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string command = argc > 1 ? argv[1] : "";
    if (command == "matrix" && argc == 4) return write_matrix(argv[2], argv[3]);
    if (command == "big" && (argc == 5 || argc == 6))
      return write_big(argv[2], argv[3], std::strtoull(argv[4], nullptr, 0), argc == 6 ? std::strtoull(argv[5], nullptr, 0) : 4096);
    if (command == "wrap" && (argc == 4 || argc == 5)) return wrap(argv[2], argv[3], argc == 5 ? argv[4] : "hash");
    if (command == "load-case" && argc == 5) return load_case(argv[2], argv[3], argv[4]);
    if (command == "weights-case" && argc == 5) return weights_case(argv[2], argv[3], argv[4]);
    return usage();
  } catch (const std::exception& error) {
    std::cerr << "pte_writer: " << error.what() << "\n";
    return 1;
  }
}
