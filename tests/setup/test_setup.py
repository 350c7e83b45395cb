#!/usr/bin/env python3
"""scripts/setup.sh as a user meets it, with stand-ins for dpkg-query, apt-get, id,
sudo and cmake (the real bash, grep, sed, tail): which packages it installs and
how, one line per step with apt's output in build/setup.log, the end of that log
when a step fails, and one sentence for a user who is neither root nor has sudo.
(.ci/run shows the same sentence in a pristine Debian 12 root, and the package
list complete.)
Usage: test_setup.py
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL_TOOLS = ("bash", "dirname", "mkdir", "grep", "sh", "env", "tail", "sed", "uname")
STAND_INS = {
    # dpkg-query -W -f=FORMAT PACKAGE: installed unless named in $FAKE_MISSING.
    # cmake: configures quietly (into the log), builds (on the terminal).
    "dpkg-query": 'for p in $FAKE_MISSING; do [ "$p" = "$3" ] && { echo "no packages found matching $3" >&2; exit 1; }; done\n'
                  'echo "install ok installed"',
    "apt-get": 'echo "apt-get $*" >>"$FAKE_CALLS"\n'
               'echo "Reading package lists... Done"\n'
               'case "$1" in install) if [ -n "$FAKE_APT_FAILS" ]; then\n'
               '  echo "E: Unable to locate package $FAKE_APT_FAILS"; exit 100; fi;; esac',
    "id": 'echo "$FAKE_UID"',
    "sudo": 'echo "sudo $*" >>"$FAKE_CALLS"\nexec "$@"',
    "cmake": 'echo "cmake $*" >>"$FAKE_CALLS"\n[ "$1" != -S ] || echo "-- Configuring done"',
    "npm": "exit 0",
}


class SetupTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.repo = os.path.join(self.directory.name, "repo")
        os.makedirs(os.path.join(self.repo, "scripts"))
        shutil.copy(os.path.join(ROOT, "scripts", "setup.sh"), os.path.join(self.repo, "scripts"))
        # LIEF's build is tested on its own (release_lief_fetch): here, only how setup.sh calls it.
        build_lief = os.path.join(self.repo, "scripts", "build_lief.sh")
        with open(build_lief, "w") as handle:
            handle.write('#!/bin/sh\necho "build_lief.sh $*" >>"$FAKE_CALLS"\n')
        os.chmod(build_lief, 0o755)
        self.bin = os.path.join(self.directory.name, "bin")
        os.makedirs(self.bin)
        for tool in REAL_TOOLS:
            os.symlink(shutil.which(tool), os.path.join(self.bin, tool))
        for tool, body in STAND_INS.items():
            self.stand_in(tool, body)
        self.calls = os.path.join(self.directory.name, "calls")

    def tearDown(self):
        self.directory.cleanup()

    def stand_in(self, tool, body):
        path = os.path.join(self.bin, tool)
        with open(path, "w") as handle:
            handle.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, 0o755)

    def setup(self, missing="", uid=0, apt_fails=""):
        environment = {"PATH": self.bin, "HOME": self.directory.name, "FAKE_CALLS": self.calls,
                       "FAKE_MISSING": missing, "FAKE_UID": str(uid), "FAKE_APT_FAILS": apt_fails}
        result = subprocess.run([os.path.join(self.repo, "scripts", "setup.sh")], capture_output=True,
                                text=True, env=environment, timeout=60)
        if not os.path.exists(self.calls):
            return result, []
        with open(self.calls) as handle:
            return result, handle.read().splitlines()

    def log(self):
        with open(os.path.join(self.repo, "build", "setup.log")) as handle:
            return handle.read()

    def test_installs_what_is_missing_one_line_per_step(self):
        result, calls = self.setup(missing="nettle-dev zlib1g-dev")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout.splitlines(), [
            "setup: installing 2 Debian packages with apt-get (log: build/setup.log)",
            "setup: LIEF 0.9.0, its Mach-O reader (scripts/build_lief.sh, once)",
            "setup: configuring (RelWithDebInfo, CMake + Ninja)", "setup: building"])
        self.assertEqual(result.stderr, "")
        self.assertEqual(calls[:2], ["apt-get update", "apt-get install -y --no-install-recommends nettle-dev zlib1g-dev"])
        self.assertIn("Reading package lists... Done", self.log())
        self.assertIn("-- Configuring done", self.log())
        # The build uses the LIEF that setup.sh built, wherever the cache is.
        lief = os.path.join(self.directory.name, ".cache", "machofix", "lief-0.9.0-" + os.uname().machine + "-linux")
        self.assertIn("build_lief.sh " + lief, calls)
        configure = [call for call in calls if call.startswith("cmake -S")]
        self.assertEqual(len(configure), 1, calls)
        self.assertIn("-DMACHOFIX_LIEF_PREFIX=" + lief, configure[0].split())

    def test_nothing_missing_installs_nothing(self):
        result, calls = self.setup()
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertNotIn("installing", result.stdout)
        self.assertFalse(any(call.startswith("apt-get") for call in calls), calls)

    def test_npm_on_the_path_is_enough(self):
        result, calls = self.setup(missing="npm")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertFalse(any(call.startswith("apt-get") for call in calls), calls)
        os.remove(os.path.join(self.bin, "npm"))
        result, calls = self.setup(missing="npm")
        self.assertIn("apt-get install -y --no-install-recommends npm", calls)

    def test_a_failed_install_shows_the_end_of_the_log(self):
        result, calls = self.setup(missing="nettle-dev", apt_fails="nettle-dev")
        self.assertEqual(result.returncode, 1)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[1], "setup: FAILED: installing 1 Debian packages with apt-get (log: build/setup.log);"
                                   " the end of build/setup.log:")
        self.assertIn("  | E: Unable to locate package nettle-dev", lines)
        self.assertFalse(any(call.startswith("cmake") for call in calls), calls)

    def test_user_without_root_or_sudo_gets_one_sentence(self):
        os.remove(os.path.join(self.bin, "sudo"))
        result, calls = self.setup(missing="nettle-dev liblzma-dev", uid=1000)
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stdout, "")
        self.assertEqual(result.stderr.splitlines(), [
            "setup: 2 Debian packages are missing and you are neither root nor have sudo: run scripts/setup.sh as"
            " root, or as root run: apt-get install --no-install-recommends nettle-dev liblzma-dev"])
        self.assertEqual(calls, [])
        self.assertFalse(os.path.exists(os.path.join(self.repo, "build")))  # nothing written

    def test_user_with_sudo(self):
        result, calls = self.setup(missing="nettle-dev", uid=1000)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("setup: installing 1 Debian packages with sudo apt-get (log: build/setup.log)", result.stdout)
        self.assertTrue(calls[0].startswith("sudo env DEBIAN_FRONTEND=noninteractive sh -c"), calls)
        self.assertEqual(calls[1:3], ["apt-get update", "apt-get install -y --no-install-recommends nettle-dev"])

    def test_without_apt_it_says_what_to_install(self):
        os.remove(os.path.join(self.bin, "apt-get"))
        result, calls = self.setup()
        self.assertEqual(result.returncode, 1)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertIn("install the equivalents of: cmake ninja-build", result.stderr)


if __name__ == "__main__":
    unittest.main()
