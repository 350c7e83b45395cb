"""The .pte/.ptd files the end-to-end tests share: ExecuTorch's samples (when present,
beside the repository) and the matrix of tests/pte/pte_writer over the Mach-O images
of tests/pte/make_blobs.sh."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pte_models(pte_writer, work, samples=""):
    """Sorted paths, the samples first; a missing samples directory is said, not hidden."""
    blobs, matrix = os.path.join(work, "blobs"), os.path.join(work, "matrix")
    os.makedirs(matrix)
    subprocess.run([os.path.join(ROOT, "tests", "pte", "make_blobs.sh"), blobs], check=True, capture_output=True)
    subprocess.run([pte_writer, "matrix", blobs, matrix], check=True, capture_output=True)
    models = sorted(os.path.join(matrix, name) for name in os.listdir(matrix))
    if samples and os.path.isdir(samples):
        return sorted(os.path.join(samples, n) for n in os.listdir(samples) if n.endswith((".pte", ".ptd"))) + models
    print(f"SKIP ExecuTorch's samples: {samples or '(none given)'} is not there; the writer's matrix only")
    return models
