"""Exports a .pte through ExecuTorch's own Python export code, without torch.

Real: ExecuTorch's sources at the pinned commit, imported from the directory given to
`prepare`: MetalBackend and AotiBackend (`preprocess`, `codesign_so`, the method-name
compile spec, the content-hash blob keys), ReplaceViewCopyWithViewPass and
DecomposeLinearPass, NamedDataStore, the exir.schema dataclasses and the serializer
(`serialize_pte_binary`, with to_executorch's default config: delegate data extracted
to segments aligned to 128), on Debian's python3-flatbuffers (flatc is not used).

Stood in for, because no torch that this code accepts exists for Debian 12:
- torch, torchao, torchgen, sympy (torch's) and ruamel: each module ExecuTorch imports
  from them is a stub class (`_StubMeta`) that fabricates attributes, can be subclassed
  and called, and is an identity decorator. The export runs fabricated stubs only where
  a pass is constructed (ExportPass's tracer and interpreter, which these passes never use);
- everything else it runs is explicit: `torch.export.passes.move_to_device_pass` (returns the
  program), `torch.no_grad`, CppWrapperCpu (whose two methods preprocess patches and
  restores), PassBase/PassResult (calling a pass runs its `call`), `torch.ops` (what the
  edge dialect reads of an op at import), torchao's Metal C shims (none), edge.yaml's
  dtype table (empty: it constrains ops this export never meets), and
  `torch._inductor.aot_compile`, which leaves what Inductor's AOT compile leaves: a
  `<method>.wrapper.so` (a copy of the given .so) and a `<method>.wrapper_weights.blob`
  (the given weights), returned as the two paths;
- `typing_extensions.deprecated`, which Debian 12's typing_extensions (4.4) lacks;
- the ExportedProgram given to preprocess: an empty graph with no user inputs;
- the emitter (it needs torch for real): the Program is written here the way the emitter
  writes one delegate call: processed bytes inline, the delegate's compile specs, a chain.
Not run: exir/__init__.py, whose re-exports (to_edge, capture, the emitter) need
executorch.extension's C++ pytree, which the archive does not have.
"""
import abc
import collections
import contextlib
import importlib.abc
import importlib.machinery
import os
import shutil
import sys
import types

_STUBBED = ("torch", "torchao", "torchgen", "sympy", "ruamel")

last_preprocess_result = None  # the PreprocessResult of the last export_pte


class _StubMeta(abc.ABCMeta):
    """The type of every stub: a class, so ExecuTorch can subclass it (with ABC too, hence
    ABCMeta), test isinstance against it, use it in type hints, call it and decorate with
    it. Only pure stubs, not ExecuTorch's subclasses of them, fabricate and swallow calls."""

    def __getattr__(cls, name):
        if name.startswith("__") or "_stub" not in cls.__dict__:
            raise AttributeError(name)
        value = _stub(f"{cls.__name__}.{name}")
        setattr(cls, name, value)
        return value

    def __call__(cls, *args, **kwargs):
        if "_stub" not in cls.__dict__:
            return super().__call__(*args, **kwargs)
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]  # used as a decorator: leave the decorated alone
        return cls

    def __getitem__(cls, item):
        return cls

    def __iter__(cls):
        return iter(())


def _stub(name):
    return _StubMeta(name.rpartition(".")[2], (), {"_stub": True, "__module__": name.rpartition(".")[0]})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of the stubbed packages get stub classes. One fabricated earlier as an
    attribute (`torch.fx` read before `import torch.fx`) is reused: both must be one
    object, or a stand-in set on one would be missed through the other."""

    def find_spec(self, fullname, path=None, target=None):
        if any(fullname == root or fullname.startswith(root + ".") for root in _STUBBED):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        parent, _, child = spec.name.rpartition(".")
        existing = getattr(sys.modules[parent], child, None) if parent else None
        return existing if isinstance(existing, _StubMeta) else _stub(spec.name)

    def exec_module(self, module):
        pass


class _CppWrapperCpu:
    """Inductor's C++ wrapper codegen: preprocess wraps these two to collect kernels."""

    def generate_c_shim_extern_kernel_call(self, kernel, *args, **kwargs):
        pass

    def generate_fallback_kernel_with_runtime_lookup_aot(self, op_overload, *args, **kwargs):
        pass


class _Ops:
    """torch.ops: `torch.ops.NS.OP.OVERLOAD`, an operator whose schema has a name and no
    arguments. ExecuTorch's edge dialect wraps some at import (EdgeOpOverloadPacket reads
    the packet's names, EdgeDialectFunctionSchema the schema's)."""

    def __init__(self, *path):
        self._path = path

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _Ops(*self._path, name)
        setattr(self, name, value)
        if len(value._path) == 2:  # a packet: torch.ops.aten.slice_copy
            value._qualified_op_name, value._op, value._overload_names = "::".join(value._path), value, []
        if len(value._path) == 3:  # an overload: torch.ops.aten.slice_copy.Tensor
            value.namespace, value.__name__ = value._path[0], ".".join(value._path[1:])
            value._schema = types.SimpleNamespace(name="::".join(value._path[:2]), overload_name=name,
                                                  arguments=[], returns=[])
        return value


class _PassBase:
    """torch.fx's PassBase: calling a pass runs its `call` on the graph module."""

    def __call__(self, graph_module):
        return self.call(graph_module)


class _Deprecated:
    """typing_extensions.deprecated (4.5, PEP 702), which Debian 12's 4.4 lacks and
    exir/_warnings.experimental subclasses: it marks what it decorates. (The real one
    also warns when a marked class is instantiated; the backends never are.)"""

    def __init__(self, message, /, *, category=DeprecationWarning, stacklevel=1):
        self.message = message

    def __call__(self, arg):
        arg.__deprecated__ = self.message
        return arg


def _stand_ins():
    import typing_extensions
    if not hasattr(typing_extensions, "deprecated"):
        typing_extensions.deprecated = _Deprecated
    import ruamel.yaml
    ruamel.yaml.YAML = lambda typ=None: types.SimpleNamespace(load=lambda text: None)
    import torch
    torch.no_grad = contextlib.nullcontext  # no tensors, no autograd
    torch.ops = _Ops()
    torch.export.passes.move_to_device_pass = lambda program, device: program
    torch._inductor.codegen.cpp_wrapper_cpu.CppWrapperCpu = _CppWrapperCpu
    torch.fx.passes.infra.pass_base.PassBase = _PassBase
    torch.fx.passes.infra.pass_base.PassResult = collections.namedtuple("PassResult", ["graph_module", "modified"])
    import torchao.experimental.ops.mps.cshim as cshim
    cshim.torchao_op_c_shim = {}


def prepare(executorch_parent: str) -> None:
    """Stand-ins into sys.modules, executorch_parent onto sys.path (idempotent). After it,
    `import executorch.backends.aoti.aoti_backend` and `...apple.metal.metal_backend` work."""
    if not any(isinstance(finder, _StubFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _StubFinder())
        _stand_ins()
    parent = os.path.abspath(executorch_parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    root = os.path.join(parent, "executorch")
    # The package without its __init__.py (see above); its submodules load as usual.
    if "executorch.exir" not in sys.modules:
        exir = types.ModuleType("executorch.exir")
        exir.__path__ = [os.path.join(root, "exir")]
        sys.modules["executorch.exir"] = exir
    # The serializer reads the schemas as resources of exir/_serialize, where ExecuTorch's
    # build puts them (exir/_serialize/BUCK); the source tree keeps them in schema/.
    for name in ("program.fbs", "scalar_type.fbs"):
        target = os.path.join(root, "exir", "_serialize", name)
        if not os.path.exists(target):
            shutil.copyfile(os.path.join(root, "schema", name), target)


def export_pte(so_path: str, weights: bytes, compile_specs: list[tuple[str, bytes]], workdir: str,
               method: str = "forward") -> bytes:
    """The .pte ExecuTorch writes for one method delegated to MetalBackend. The stand-in
    aot_compile copies so_path to WORKDIR/<method>.wrapper.so and writes weights to
    WORKDIR/<method>.wrapper_weights.blob; the real MetalBackend.preprocess (codesigning
    when a `codesign_identity` spec is given) turns them into named data and processed
    bytes; the real serializer writes the Program and the named data. Returns the bytes."""
    global last_preprocess_result
    import torch
    from executorch.backends.apple.metal.metal_backend import MetalBackend
    from executorch.exir._serialize._named_data_store import NamedDataStore
    from executorch.exir._serialize._program import PTEFile, serialize_pte_binary
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir import schema
    from executorch.exir.version import EXECUTORCH_SCHEMA_VERSION

    def aot_compile(module, args, kwargs=None, *, options=None):
        stem = os.path.join(workdir, method)
        shutil.copyfile(so_path, stem + ".wrapper.so")
        with open(stem + ".wrapper_weights.blob", "wb") as blob:
            blob.write(weights)
        return [stem + ".wrapper.so", stem + ".wrapper_weights.blob"]

    torch._inductor.aot_compile = aot_compile
    graph = types.SimpleNamespace(nodes=[])
    graph_module = types.SimpleNamespace(graph=graph)
    program = types.SimpleNamespace(graph_module=graph_module, graph=graph, module=lambda: graph_module,
                                    graph_signature=types.SimpleNamespace(user_inputs=[]))
    specs = [CompileSpec(key, value) for key, value in compile_specs]
    specs.append(MetalBackend.generate_method_name_compile_spec(method))
    result = last_preprocess_result = MetalBackend.preprocess(program, specs)

    # As the emitter writes a delegate call, and as to_executorch gathers the lowered
    # modules' named data into one store.
    plan = schema.ExecutionPlan(
        name=method, container_meta_type=schema.ContainerMetadata("", ""), values=[], inputs=[], outputs=[],
        chains=[schema.Chain(inputs=[], outputs=[], stacktrace=None,
                             instructions=[schema.Instruction(schema.DelegateCall(delegate_index=0, args=[]))])],
        operators=[], non_const_buffer_sizes=[0],
        delegates=[schema.BackendDelegate(
            id=MetalBackend.__name__, compile_specs=specs,
            processed=schema.BackendDelegateDataReference(location=schema.DataLocation.INLINE, index=0))])
    pte_program = schema.Program(
        version=EXECUTORCH_SCHEMA_VERSION, execution_plan=[plan], constant_buffer=[schema.Buffer(storage=b"")],
        backend_delegate_data=[schema.BackendDelegateInlineData(data=result.processed_bytes)],
        segments=[], constant_segment=schema.SubsegmentOffsets(segment_index=0, offsets=[]))
    store = NamedDataStore()
    store.merge_named_data_store(result.data_store_output)
    pte = serialize_pte_binary(PTEFile(program=pte_program, named_data=store.get_named_data_store_output()),
                               extract_delegate_segments=True, segment_alignment=128)
    return bytes(pte)
