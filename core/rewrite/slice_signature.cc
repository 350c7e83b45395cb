// A slice's signature in a Mach-O job: the input's, read and verified once (every
// decision and report uses that reading), the refusals it leads to, and the new
// signature after a rewrite, renewed, added or replaced, then verified.
#include "core/base/proof_seam.h"
#include "core/format/macho_format.h"
#include "core/rewrite/slice_judgement.h"

namespace machofix {

InputSignature check_input_signature(const MachO& image, const KnownPageHashes* known) {
  InputSignature input;
  SignatureReport& report = input.report;
  try {
    input.signature = read_code_signature(image);
  } catch (const Error& error) {
    input.read_error = error;
    report.status = SignatureStatus::Invalid;
    report.findings.problems.push_back(unreadable_signature(error));
    return input;
  }
  if (!input.signature) return input;
  report.style = input.signature->style();
  report.identifier = input.signature->identifier();
  report.hash_types = input.signature->hash_type_names();
  report.page_size = input.signature->page_size();
  report.findings = check_code_signature(image, *input.signature, known);
  report.status = report.findings.valid() ? SignatureStatus::Valid : SignatureStatus::Invalid;
  return input;
}

SignatureReport signature_report(const MachO& image, const KnownPageHashes* known) {
  return check_input_signature(image, known).report;
}

std::string signature_identifier(const MachO& image, const RepairOptions& options) {
  return options.identifier.empty() ? default_identifier(image, options.file_name) : options.identifier;
}

uint64_t signature_room(const JudgedSlice& judged, const RepairOptions& options) {
  const MachO& image = *judged.image;
  if (image.code_signature.present && !judged.input.read_error) return 0;
  return adhoc_signature_room(image.bytes.size(), signature_identifier(image, options));
}

namespace {

// The first problem of an invalid signature, as the refusal and the report name it.
std::string first_problem(const InputSignature& input) {
  return input.read_error ? input.read_error->problem() : describe(input.report.findings.problems.front());
}

// A new signature is named after the install name, else the file name: standard
// input has no file name.
const std::string& new_identifier(const std::string& identifier) {
  if (identifier.empty())
    fail("a new signature needs an identifier, and the file has neither an install name nor a file name (standard "
         "input): sign it with machofix sign --identifier");
  return identifier;
}

}  // namespace

[[noreturn]] void refuse_invalid_signature(const InputSignature& input) {
  size_t more = input.report.findings.problems.size() - 1;
  std::string message = "the input signature is invalid: " + first_problem(input);
  if (more) message += " (and " + std::to_string(more) + " more problem" + (more == 1 ? "" : "s") + ")";
  message +=
      "; re-signing would make a changed or corrupt file look valid, so nothing is written (pass --resign-invalid "
      "to re-sign it anyway)";
  Error error(message, input.report.findings.first_problem_at());
  throw error.as_refusal();
}

[[noreturn]] void refuse_identity() {
  Error error(
      "signed with an identity (a CMS signature, e.g. Developer ID): it cannot be renewed without the signer's key; "
      "pass --adhoc to replace it with an ad hoc signature");
  throw error.as_refusal();
}

SignatureOutcome update_signature(const JudgedSlice& judged, OutputImage& bytes, const std::optional<MachO>& rewritten,
                                  const RepairOptions& options) {
  SignatureOutcome outcome;
  const MachO& image = *judged.image;
  const InputSignature& input = judged.input;
  uint64_t base = image.bytes.base();
  std::string identifier = signature_identifier(image, options);
  // A valid input signature's hashes serve every page the output borrows unchanged.
  std::optional<VerifiedInputHashes> verified;
  if (input.report.status == SignatureStatus::Valid && input.signature) verified.emplace(image, *input.signature);
  const KnownPageHashes* known = verified ? &*verified : nullptr;
  // A new signature's own page hashes serve its check for the pages no one can have
  // changed since they were hashed (HashedPages): a signature added to an unsigned
  // slice, or one renewed over an invalid one (whose hashes serve nothing).
  std::optional<HashedPages> signed_pages;
  std::optional<HashedPagesList> renewed_pages;
  if (!image.code_signature.present) {
    if (!options.sign_unsigned) {
      if (image.cputype == macho::CPU_TYPE_ARM64)
        outcome.warnings.push_back("unsigned arm64 slice left unsigned (it cannot run as is); pass --sign to sign it");
      return outcome;
    }
    known = &signed_pages.emplace(add_adhoc_signature(bytes, base, new_identifier(identifier)));
  } else if (input.read_error) {  // only with --resign-invalid: judge_slice refuses it otherwise
    known = &signed_pages.emplace(replace_unreadable_signature(bytes, base, new_identifier(identifier)));
  } else {
    // Read once: the proof's reading of the rewritten slice, or now for `sign`.
    std::optional<MachO> unchanged;
    const MachO& current = rewritten ? *rewritten : unchanged.emplace(parse_macho(bytes.bytes(base)));
    HashedPagesList written = input.signature->has_identity ? replace_with_adhoc_signature(bytes, current, known)
                                                             : renew_code_signature(bytes, current, known);
    if (!known) known = &renewed_pages.emplace(std::move(written));
  }
  // One verification of the new signature serves both the check and the report.
  std::vector<uint8_t> spoiled;  // tests only (proof_seam.h)
  SignatureReport after = signature_report(parse_macho(seam::offer(seam::ProofStep::Signature, bytes.bytes(base), spoiled)), known);
  if (after.status != SignatureStatus::Valid)
    fail_as(ErrorKind::ProofFailed, "the renewed signature does not verify, nothing written: " +
         (after.findings.valid() ? std::string("unreadable") : describe(after.findings.problems.front())));
  after.status = !image.code_signature.present ? SignatureStatus::Added
                 : input.read_error || input.signature->has_identity ? SignatureStatus::ReplacedAdHoc
                                                                      : SignatureStatus::Renewed;
  outcome.after = std::move(after);
  if (input.report.status == SignatureStatus::Invalid)
    outcome.warnings.push_back("input signature was invalid (" + describe(input.report.findings.problems.front()) +
                               "): re-signed because of --resign-invalid" +
                               (input.read_error ? ", with a new linker-style ad hoc signature" : ""));
  return outcome;
}

}  // namespace machofix
