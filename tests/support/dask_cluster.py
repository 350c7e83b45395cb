"""A Dask cluster on 127.0.0.1 as a deployment runs one: `dask scheduler` and each
`dask worker` a process of its own (never another address), their logs in the work
directory. Used by the cluster tests (tests/dask) and the benchmark (bench/)."""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python_with_distributed():
    """This Python if it has distributed, else Debian's (python3-distributed), which the
    dask command line runs on; None if neither has it."""
    for python in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(python) and subprocess.run([python, "-c", "import distributed"],
                                                     capture_output=True).returncode == 0:
            return python
    return None


class Cluster:
    """A scheduler and workers of one thread each; the environment runs this
    checkout's machofix package with MACHOFIX_EXECUTABLE."""

    def __init__(self, work, machofix):
        self.work, self.processes, self.workers = work, [], []
        self.file = os.path.join(work, "scheduler.json")
        self.env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), MACHOFIX_EXECUTABLE=machofix)
        self.env.pop("MACHOFIX_LIEF_PLUGIN", None)
        self.start(["dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                    "--scheduler-file", self.file], "scheduler")
        deadline = time.time() + 60
        while not os.path.exists(self.file) and time.time() < deadline:
            time.sleep(0.2)

    def start(self, command, name):
        log = open(os.path.join(self.work, f"{name}.log"), "w")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.work)
        self.processes.append(process)
        return process

    def add_worker(self):
        worker = self.start(["dask", "worker", "--no-nanny", "--nthreads", "1", "--host", "127.0.0.1",
                             "--no-dashboard", "--scheduler-file", self.file], f"worker{len(self.workers)}")
        self.workers.append(worker)
        return worker

    def wait_for_workers(self, count):
        """The workers' addresses, once `count` have joined (asked by a Python that has
        distributed, whichever runs the caller)."""
        script = ("import json, sys; from distributed import Client\n"
                  "with Client(scheduler_file=sys.argv[1], timeout=60) as client:\n"
                  "    client.wait_for_workers(int(sys.argv[2]), timeout=120)\n"
                  "    print(json.dumps(sorted(client.scheduler_info()['workers'])))\n")
        result = subprocess.run([python_with_distributed() or sys.executable, "-c", script, self.file, str(count)],
                                capture_output=True, text=True, check=True, env=self.env)
        return json.loads(result.stdout)

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
