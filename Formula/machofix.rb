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
  # incompatible version. Built here, static, Mach-O only.
  resource "lief" do
    url "https://github.com/lief-project/LIEF/archive/refs/tags/0.9.0.tar.gz"
    sha256 "a3ace799fd17faac5c7cf696867e4458ca7ce4c310c4fefe44542d7970d82c24"
  end

  def install
    # LIEF with the options scripts/build_lief.sh uses (scripts/lief/options.cmake: the
    # Mach-O reader alone, static, position-independent), installed in the build tree:
    # it is linked into the reader and not installed.
    lief = buildpath/"lief"
    resource("lief").stage do
      system "cmake", "-S", ".", "-B", "build", "-C", buildpath/"scripts/lief/options.cmake",
             *std_cmake_args(install_prefix: lief)
      system "cmake", "--build", "build", "--target", "LIB_LIEF_STATIC"
      system "cmake", "--install", "build"
    end

    # libarchive is keg-only: CMake and pkg-config are told where it is.
    libarchive = Formula["libarchive"].opt_prefix
    ENV.prepend_path "PKG_CONFIG_PATH", libarchive/"lib/pkgconfig"
    # The installed executable looks for its reader beside itself and in
    # lib/machofix, never in this build tree. pte_writer writes the test's model.
    args = %W[
      -DMACHOFIX_TESTS=OFF
      -DMACHOFIX_PTE_WRITER=ON
      -DMACHOFIX_PLUGIN_BUILD_PATH=OFF
      -DCMAKE_PREFIX_PATH=#{lief};#{libarchive}
    ]
    system "cmake", "-S", ".", "-B", "build", "-G", "Ninja", *args, *std_cmake_args
    system "cmake", "--build", "build"
    system "cmake", "--install", "build"

    # The model the test repairs, made here from the source tree, stable and HEAD
    # alike (samples/aoti_metal/build.sh): an arm64 Metal .so linked by Apple's own ld
    # against the sample's stubs, depending on PyTorch's libomp without using it, in
    # an ExecuTorch .pte. Apple's clang and ld themselves: the compiler shim's flags are
    # for this Mac, and the .so is for arm64 on any Mac.
    system "cmake", "--build", "build", "--target", "pte_writer"
    ENV["MACHOFIX_SAMPLE_CC"] = DevelopmentTools.locate("clang")
    ENV["MACHOFIX_SAMPLE_LD"] = DevelopmentTools.locate("ld")
    system "samples/aoti_metal/build.sh", buildpath/"sample", buildpath/"build/pte_writer"
    pkgshare.install "sample/metal_model.pte", "sample/machofix.toml"
  end

  test do
    # A HEAD build says the version in main's CMakeLists.txt.
    version_line = version.head? ? /^machofix \d+(\.\d+)+$/ : "machofix #{version}"
    assert_match version_line, shell_output("#{bin}/machofix --version")

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
