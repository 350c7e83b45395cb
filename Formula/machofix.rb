# Homebrew formula of machofix, built from a release's source archive (docs/release.md).
# The sha256 of the stable url is written by scripts/release/formula.sh when a release
# is built; a release commit copies the rendered formula (the release's machofix.rb)
# here, and the release workflow refuses a tag whose formula differs from it.
class Machofix < Formula
  desc "Repair Mach-O dylibs, including the Metal .so inside ExecuTorch .pte models"
  homepage "https://github.com/machofix/machofix"
  url "https://github.com/machofix/machofix/releases/download/v0.1.0/machofix-0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  # machofix's own code; LIEF 0.9.0, the resource below, is linked in statically.
  license all_of: ["BSD-3-Clause", "Apache-2.0"]
  head "https://github.com/machofix/machofix.git", branch: "main"

  livecheck do
    url :stable
    strategy :github_latest
  end

  # spdlog, fmt, CLI11, flatbuffers, toml++ and nlohmann-json are compiled in as
  # headers; flatc generates the .pte schema's header.
  depends_on "cli11" => :build
  depends_on "cmake" => :build
  depends_on "flatbuffers" => :build
  depends_on "fmt" => :build
  depends_on "ninja" => :build
  depends_on "nlohmann-json" => :build
  depends_on "pkgconf" => :build
  depends_on "spdlog" => :build
  depends_on "tomlplusplus" => :build
  # Linked as shared libraries on macOS (MACHOFIX_STATIC_DEPS is off there).
  depends_on "libarchive"
  depends_on "libplist"
  depends_on :macos # Linux: the release's archives and manylinux2014 wheels
  depends_on "yaml-cpp"

  # The reader builds against LIEF 0.9.0 only; Homebrew's lief is a later,
  # incompatible version. scripts/build_lief.sh builds its static Mach-O part.
  resource "lief" do
    url "https://github.com/lief-project/LIEF/archive/refs/tags/0.9.0.tar.gz"
    sha256 "a3ace799fd17faac5c7cf696867e4458ca7ce4c310c4fefe44542d7970d82c24"
  end

  def install
    # build_lief.sh checks the archive's sha256 and its extracted files' content hash,
    # and downloads nothing when given the archive.
    lief = buildpath/"lief"
    ENV["MACHOFIX_LIEF_TARBALL"] = resource("lief").fetch.to_s
    ENV["MACHOFIX_JOBS"] = ENV.make_jobs.to_s
    system "scripts/build_lief.sh", lief

    # libarchive is keg-only: CMake and pkg-config are told where it is.
    libarchive = Formula["libarchive"].opt_prefix
    ENV.prepend_path "PKG_CONFIG_PATH", libarchive/"lib/pkgconfig"
    # The installed executable looks for its reader beside itself and in
    # lib/machofix, never in this build tree.
    args = %W[
      -DMACHOFIX_TESTS=OFF
      -DMACHOFIX_PLUGIN_BUILD_PATH=OFF
      -DCMAKE_PREFIX_PATH=#{lief};#{libarchive}
    ]
    system "cmake", "-S", ".", "-B", "build", "-G", "Ninja", *args, *std_cmake_args
    system "cmake", "--build", "build"
    system "cmake", "--install", "build"

    # The model the test repairs: its Metal .so depends on PyTorch's libomp without
    # using it (the release's source archive holds it; a clone makes it with
    # samples/aoti_metal/build.sh).
    pkgshare.install "samples/aoti_metal/metal_model.pte" unless build.head?
    pkgshare.install "samples/aoti_metal/machofix.toml"
  end

  test do
    assert_match "machofix #{version}", shell_output("#{bin}/machofix --version") unless version.head?
    # A HEAD build has no model to repair: it is made, not kept in git.
    return unless (pkgshare/"metal_model.pte").exist?

    cp pkgshare/"metal_model.pte", testpath
    cp pkgshare/"machofix.toml", testpath

    # Before: findings (exit status 1), libomp unused and forbidden by the contract
    # beside the model.
    output = shell_output("#{bin}/machofix check metal_model.pte", 1)
    assert_match "libomp.dylib, which supplies no symbol", output
    assert_match "[forbidden-dependency]", output

    system bin/"machofix", "prune", "metal_model.pte", "-o", "fixed.pte"
    assert_match "0 findings", shell_output("#{bin}/machofix check fixed.pte --contract machofix.toml")
    assert_match "fixed.pte: valid", shell_output("#{bin}/machofix verify fixed.pte")

    # After: the .so no longer depends on libomp; every other library stays.
    report = JSON.parse(shell_output("#{bin}/machofix inspect --json - fixed.pte"))
    blobs = report["files"].first["pte"]["blobs"]
    dependencies = blobs.flat_map do |blob|
      blob["macho"]["slices"].flat_map { |slice| slice["dylibs"].map { |dylib| dylib["install_name"] } }
    end
    assert_includes dependencies, "/usr/lib/libSystem.B.dylib"
    assert_includes dependencies, "/System/Library/Frameworks/Metal.framework/Versions/A/Metal"
    assert_empty dependencies.grep(/libomp/)
  end
end
