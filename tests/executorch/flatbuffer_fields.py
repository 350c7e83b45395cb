"""Where every field of a .pte's Program (or a .ptd's FlatTensor) lies in the file, for
the differential's table operator: each table's vtable entries, scalars, offsets to
tables, vectors and strings, and vector lengths, as (offset, width, kind).

The schemas are ExecuTorch's schema/program.fbs and
extension/flat_tensor/serialize/flat_tensor.fbs at the pinned commit, by field order
(a union takes two slots: its type byte, then its offset). Only what the runtime reads
at load and at backend init is followed; other fields are still listed where they
lie. The walk is bounds-checked and stops at anything it cannot read, so a damaged
base yields fewer fields, never an exception.
"""
import struct

U8, U16, U32, U64 = "u8", "u16", "u32", "u64"
KERNEL_TYPES = [None, "Null", "Int", "Bool", "Double", "Tensor", "String", "IntList", "DoubleList", "BoolList",
                "TensorList", "OptionalTensorList"]
INSTRUCTIONS = [None, "KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall"]

# table: [field kinds by slot]; "t:X" a table, "v:X" a vector of tables, "vs:W" a vector
# of scalars of width W, "s" a string, "vs" a vector of strings, "ut:U"/"u:U" a union's
# type byte and offset (U names the list of its member tables).
SCHEMA = {
    "Program": [U32, "v:ExecutionPlan", "v:Buffer", "v:BackendDelegateInlineData", "v:DataSegment",
                "t:SubsegmentOffsets", "v:SubsegmentOffsets", "v:NamedData"],
    "ExecutionPlan": ["s", "t:ContainerMetadata", "v:EValue", "vs:4", "vs:4", "v:Chain", "v:Operator",
                      "v:BackendDelegate", "vs:8", "v:NonConstBufferDevice"],
    "ContainerMetadata": ["s", "s"],
    "EValue": ["ut:KernelTypes", "u:KernelTypes"],
    "Null": [],
    "Int": [U64],
    "Bool": [U8],
    "Double": [U64],
    "String": ["s"],
    "IntList": ["vs:8"],
    "DoubleList": ["vs:8"],
    "BoolList": ["vs:1"],
    "TensorList": ["vs:4"],
    "OptionalTensorList": ["vs:4"],
    "Tensor": [U8, U32, "vs:4", "vs:1", U8, U32, "t:AllocationDetails", U8, U8, "t:ExtraTensorInfo"],
    "AllocationDetails": [U32, U32, U32],
    "ExtraTensorInfo": [U64, "s", U8, U8, U8],
    "Chain": ["vs:4", "vs:4", "v:Instruction", "v:FrameList"],
    "Instruction": ["ut:InstructionArguments", "u:InstructionArguments"],
    "KernelCall": [U32, "vs:4"],
    "DelegateCall": [U32, "vs:4"],
    "MoveCall": [U32, U32],
    "JumpFalseCall": [U32, U32],
    "FreeCall": [U32],
    "FrameList": ["v:Frame"],
    "Frame": ["s", U32, "s", "s"],
    "Operator": ["s", "s"],
    "BackendDelegate": ["s", "t:BackendDelegateDataReference", "v:CompileSpec"],
    "BackendDelegateDataReference": [U8, U32],
    "CompileSpec": ["s", "vs:1"],
    "NonConstBufferDevice": [U32, U8, U8],
    "Buffer": ["vs:1"],
    "BackendDelegateInlineData": ["vs:1"],
    "DataSegment": [U64, U64],
    "SubsegmentOffsets": [U32, "vs:8"],
    "NamedData": ["s", U32],
    # flat_tensor.fbs
    "FlatTensor": [U32, "v:DataSegment", "v:FlatNamedData"],
    "FlatNamedData": ["s", U32, "t:TensorLayout"],
    "TensorLayout": [U8, "vs:4", "vs:1"],
}
UNIONS = {"KernelTypes": KERNEL_TYPES, "InstructionArguments": INSTRUCTIONS}
WIDTH = {U8: 1, U16: 2, U32: 4, U64: 8}
MAX_FIELDS = 20000  # a base's fields; a huge constant vector is not walked element by element


class _Walk:
    def __init__(self, data):
        self.data, self.fields, self.seen = data, [], set()

    def u32(self, at):
        if at < 0 or at + 4 > len(self.data):
            raise ValueError
        return struct.unpack_from("<I", self.data, at)[0]

    def add(self, at, width, kind):
        if len(self.fields) < MAX_FIELDS and 0 <= at and at + width <= len(self.data):
            self.fields.append((at, width, kind))

    def follow(self, at):
        """The absolute position an offset field at `at` points to (and the field itself)."""
        self.add(at, 4, "offset")
        return at + self.u32(at)

    def table(self, at, name):
        if (at, name) in self.seen or len(self.fields) >= MAX_FIELDS:
            return
        self.seen.add((at, name))
        vtable = at - struct.unpack("<i", struct.pack("<I", self.u32(at)))[0]
        self.add(at, 4, "vtable offset")
        if vtable < 0 or vtable + 4 > len(self.data):
            return
        vtable_size = struct.unpack_from("<H", self.data, vtable)[0]
        self.add(vtable, 2, "vtable size")
        self.add(vtable + 2, 2, "table size")
        slots = SCHEMA[name]
        union_type = {}
        for slot, kind in enumerate(slots):
            entry = vtable + 4 + 2 * slot
            if entry + 2 > min(len(self.data), vtable + vtable_size):
                break
            self.add(entry, 2, "vtable entry")
            field_offset = struct.unpack_from("<H", self.data, entry)[0]
            if field_offset == 0:
                continue
            self.field(at + field_offset, kind, union_type)

    def field(self, at, kind, union_type):
        if kind in WIDTH:
            self.add(at, WIDTH[kind], "scalar")
        elif kind.startswith("ut:"):
            self.add(at, 1, "union type")
            if at < len(self.data):
                union_type[kind[3:]] = self.data[at]
        elif kind.startswith("u:"):
            members = UNIONS[kind[2:]]
            which = union_type.get(kind[2:], 0)
            target = self.follow(at)
            if 0 < which < len(members):
                self.table(target, members[which])
        elif kind.startswith("t:"):
            self.table(self.follow(at), kind[2:])
        elif kind == "s":
            target = self.follow(at)
            self.add(target, 4, "string length")
        elif kind.startswith("vs:"):
            target = self.follow(at)
            self.add(target, 4, "vector length")
            width, count = int(kind[3:]), self.u32(target)
            for index in range(min(count, 64)):  # the first elements: indices, offsets
                self.add(target + 4 + width * index, width, "element")
        elif kind.startswith("v:"):
            target = self.follow(at)
            self.add(target, 4, "vector length")
            for index in range(min(self.u32(target), 4096)):
                element = target + 4 + 4 * index
                self.table(self.follow(element), kind[2:])


def fields(data):
    """(offset, width, kind) of every field found, in a .pte (file identifier ET..) or
    a .ptd (FT01): both flatbuffers start at 0, their headers in the padding after the
    identifier."""
    root = "FlatTensor" if data[4:8] == b"FT01" else "Program"
    walk = _Walk(data)
    try:
        walk.table(walk.follow(0), root)
    except (ValueError, struct.error, IndexError, KeyError):
        pass
    return walk.fields
