# gdb pretty-printers for lina: Tensor, Var, Node (and every op struct
# derived from it), and the Eigen matrices and maps of the CPU kernels.
#
#   OMP_NUM_THREADS=1 gdb -x scripts/gdb/lina_printers.py --args build/debug/lina train ...
#
#   (gdb) print dout          lina::Tensor float32[2, 8, 4, 32] cpu |x| = 4.71e+01 {0.0123, ...}
#   (gdb) print *this         the op: its name, the name of its output, its inputs and saved fields
#   (gdb) print G             an Eigen matrix as rows (at most 8 × 8 shown)
#   (gdb) lina-values dout 64 the first 64 values of a tensor, one row per last-dimension slice
#   (gdb) lina-break scan_sequential.cpp e.noalias() = G * k_t
#                             a breakpoint on the line that contains that text
#
# gdb reads the tensors' memory itself: this works in a core file too, and
# never calls into the program. CUDA tensors show their type and shape only.
import array
import math
import re

import gdb

SHOWN = 6            # values in a one-line summary
MATRIX_SHOWN = 8     # rows and columns of an Eigen matrix
NORM_LIMIT = 1 << 22 # elements read to compute a norm

DTYPES = {0: ("float32", "f", 4), 1: ("float64", "d", 8), 2: ("int32", "i", 4)}
DEVICES = {0: "cpu", 1: "cuda"}


# ---- reading libstdc++ containers --------------------------------------------------

def std_vector(val):
    impl = val["_M_impl"]
    start, finish = impl["_M_start"], impl["_M_finish"]
    return [(start + i).dereference() for i in range(int(finish - start))]


def std_string(val):
    return val["_M_dataplus"]["_M_p"].string(length=int(val["_M_string_length"]))


def shared_ptr(val):
    """The raw pointer held by a std::shared_ptr (0 when empty)."""
    return val["_M_ptr"]


def c_string(ptr):
    return ptr.string() if int(ptr) != 0 else ""


def enum_name(val):
    """lina::OpKind::L2Norm -> L2Norm"""
    return str(val).split("::")[-1]


def fmt(x):
    return "%.4g" % x


# ---- Tensor ---------------------------------------------------------------------------

def tensor_info(val):
    """(description, values or None, norm or None) of a lina::Tensor."""
    storage = shared_ptr(val["storage_"])
    # A Tensor whose constructor has not run yet holds whatever was in memory.
    impl = val["shape_"]["_M_impl"]
    ndim = int(impl["_M_finish"] - impl["_M_start"])
    if not 0 <= ndim <= 8 or int(val["dtype_"]) not in DTYPES or int(val["device_"]) not in DEVICES:
        return ("undefined" if int(storage) == 0 else "(not constructed yet)"), None, None
    shape = [int(d) for d in std_vector(val["shape_"])]
    if any(d < 0 for d in shape):
        return "(not constructed yet)", None, None
    name, code, size = DTYPES[int(val["dtype_"])]
    device = DEVICES[int(val["device_"])]
    desc = "%s%s %s" % (name, shape, device)
    if int(storage) == 0:
        # Tensor() has no shape; release_buffer() keeps it (an op's output
        # that backward(Graph::Free) let go of, as no backward reads it).
        return ("%s (buffer released)" % desc if ndim > 0 else "undefined"), None, None
    if device != "cpu":
        return desc, None, None
    numel = 1
    for d in shape:
        numel *= d
    n = min(numel, NORM_LIMIT)
    address = int(storage.dereference()["ptr"]) + int(val["offset_"]) * size
    values = array.array(code)
    try:
        if n > 0:
            values.frombytes(bytes(gdb.selected_inferior().read_memory(address, n * size)))
    except gdb.MemoryError:
        return desc + " (memory not readable)", None, None
    norm = math.sqrt(sum(float(x) * float(x) for x in values))
    return desc, values, norm


def tensor_summary(val, shown=SHOWN):
    desc, values, norm = tensor_info(val)
    if values is None:
        return desc
    head = ", ".join(fmt(x) for x in values[:shown])
    more = ", ..." if len(values) > shown else ""
    return "%s |x| = %.4g {%s%s}" % (desc, norm, head, more)


class TensorPrinter:
    def __init__(self, val):
        self.val = val

    def to_string(self):
        return "lina::Tensor " + tensor_summary(self.val)


# ---- Var ------------------------------------------------------------------------------

def var_name(impl):
    name = std_string(impl["name"])
    node = shared_ptr(impl["grad_fn"])
    if not name and int(node) != 0:
        name = c_string(node.dereference()["output_name"])
    return name


def var_summary(val, with_values=True):
    impl = shared_ptr(val["impl_"])
    if int(impl) == 0:
        return "undefined Var"
    impl = impl.dereference()
    name = var_name(impl)
    data = tensor_summary(impl["data"]) if with_values else tensor_info(impl["data"])[0]
    text = ('"%s" ' % name if name else "") + data
    node = shared_ptr(impl["grad_fn"])
    if int(node) != 0:
        text += ", made by %s" % enum_name(node.dereference()["kind"])
    elif bool(impl["requires_grad"]):
        text += ", leaf"
    grad_desc, _, grad_norm = tensor_info(impl["grad"])
    if grad_desc != "undefined":
        text += ", grad |g| = %.4g" % grad_norm if grad_norm is not None else ", grad " + grad_desc
    return text


class VarPrinter:
    def __init__(self, val):
        self.val = val

    def to_string(self):
        return "lina::Var " + var_summary(self.val)


# ---- Node and the op structs ------------------------------------------------------------

def derives_from_node(t):
    t = t.strip_typedefs()
    if t.code != gdb.TYPE_CODE_STRUCT:
        return False
    if t.tag == "lina::Node":
        return True
    return any(f.is_base_class and derives_from_node(f.type) for f in t.fields())


class NodePrinter:
    def __init__(self, val):
        try:  # the op struct behind a Node& or Node*
            val = val.cast(val.dynamic_type)
        except gdb.error:
            pass
        self.val = val

    def node(self):
        v = self.val
        while v.type.strip_typedefs().tag != "lina::Node":
            v = v[v.type.strip_typedefs().fields()[0]]  # the base class sub-object
        return v

    def to_string(self):
        node = self.node()
        output = c_string(node["output_name"])
        text = "%s: op %s" % (self.val.type.strip_typedefs().tag, enum_name(node["kind"]))
        if output:
            text += ' making "%s"' % output
        text += " (op #%d recorded)" % int(node["sequence"])
        inputs = [var_summary(v, with_values=False) for v in std_vector(node["inputs"])]
        return text + "; inputs: " + "; ".join(inputs)

    def children(self):
        t = self.val.type.strip_typedefs()
        for f in t.fields():
            if f.is_base_class or f.artificial or not f.name or f.name.startswith("_vptr"):
                continue
            yield f.name, self.val[f.name]


# ---- Eigen ------------------------------------------------------------------------------

def eigen_layout(val):
    """(data pointer, rows, cols, row stride, col stride, scalar type) of a
    dense Eigen matrix or map, or None when it is not one."""
    t = val.type.strip_typedefs()
    tag = t.tag or ""
    if tag.startswith("Eigen::Map<"):
        matrix_t = t.template_argument(0).strip_typedefs().unqualified()
        data = val["m_data"]
        rows_field, cols_field = val["m_rows"], val["m_cols"]
        rows = int(rows_field["m_value"]) if rows_field.type.fields() else None
        cols = int(cols_field["m_value"]) if cols_field.type.fields() else None
        outer = None
        try:
            stride_t = t.template_argument(2).strip_typedefs()
            if "OuterStride" in (stride_t.tag or ""):
                outer = int(val["m_stride"]["m_outer"]["m_value"])
        except (gdb.error, RuntimeError, IndexError):
            pass
    elif tag.startswith("Eigen::Matrix<"):
        matrix_t = t
        storage = val["m_storage"]
        data = storage["m_data"]
        names = [f.name for f in storage.type.strip_typedefs().fields()]
        rows = int(storage["m_rows"]) if "m_rows" in names else None
        cols = int(storage["m_cols"]) if "m_cols" in names else None
        outer = None
    else:
        return None
    fixed_rows, fixed_cols = int(matrix_t.template_argument(1)), int(matrix_t.template_argument(2))
    rows = fixed_rows if fixed_rows >= 0 else rows
    cols = fixed_cols if fixed_cols >= 0 else cols
    row_major = int(matrix_t.template_argument(3)) & 1
    if rows is None or cols is None:
        return None
    if data.type.code == gdb.TYPE_CODE_ARRAY:  # fixed-size storage: a plain array
        data = data.address.cast(matrix_t.template_argument(0).pointer())
    if row_major:
        row_stride, col_stride = (outer if outer is not None else cols), 1
    else:
        row_stride, col_stride = 1, (outer if outer is not None else rows)
    return data, rows, cols, row_stride, col_stride, matrix_t.template_argument(0)


class EigenPrinter:
    def __init__(self, val, layout):
        self.val = val
        self.layout = layout

    def to_string(self):
        data, rows, cols, rs, cs, scalar = self.layout
        kind = "vector" if cols == 1 else "matrix"
        head = "Eigen %s %d x %d of %s" % (kind, rows, cols, scalar)
        if int(data) == 0 or rows * cols == 0:
            return head + " (empty)"
        lines = []
        if cols == 1:  # a column vector on one line
            shown = [fmt(float((data + i * rs).dereference())) for i in range(min(rows, SHOWN * 2))]
            return head + " {" + ", ".join(shown) + (", ..." if rows > SHOWN * 2 else "") + "}"
        for i in range(min(rows, MATRIX_SHOWN)):
            row = [float((data + i * rs + j * cs).dereference()) for j in range(min(cols, MATRIX_SHOWN))]
            lines.append("  [" + " ".join("%11.4g" % x for x in row) + (" ..." if cols > MATRIX_SHOWN else "") + "]")
        if rows > MATRIX_SHOWN:
            lines.append("  ...")
        return head + "\n" + "\n".join(lines)


# ---- registration -----------------------------------------------------------------------

def lookup(val):
    t = val.type.strip_typedefs()
    if t.code == gdb.TYPE_CODE_REF:
        t = t.target().strip_typedefs()
    tag = t.unqualified().tag
    if not tag:
        return None
    if tag == "lina::Tensor":
        return TensorPrinter(val)
    if tag == "lina::Var":
        return VarPrinter(val)
    if tag.startswith("Eigen::Map<") or tag.startswith("Eigen::Matrix<"):
        try:
            layout = eigen_layout(val)
        except (gdb.error, RuntimeError):
            layout = None
        return EigenPrinter(val, layout) if layout else None
    if tag.startswith("lina::") and derives_from_node(t):
        return NodePrinter(val)
    return None


class BreakAtTextCommand(gdb.Command):
    """lina-break FILE TEXT: a breakpoint on the first line of FILE (a path
or the end of one, as in `break FILE:LINE`) that contains TEXT, e.g.
    lina-break scan_sequential.cpp e.noalias() = G * k_t
so that a walk-through keeps working when lines move."""

    def __init__(self):
        super().__init__("lina-break", gdb.COMMAND_BREAKPOINTS, gdb.COMPLETE_FILENAME)

    def invoke(self, arg, from_tty):
        parts = arg.strip().split(None, 1)
        if len(parts) != 2:
            raise gdb.GdbError("usage: lina-break FILE TEXT")
        wanted, text = parts
        path = self.find_source(wanted)
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if text in line:
                    gdb.execute("break %s:%d" % (path, number), from_tty)
                    return
        raise gdb.GdbError("lina-break: no line of %s contains '%s'" % (path, text))

    @staticmethod
    def find_source(wanted):
        """The full path of a source file of the program that ends with `wanted`."""
        import os
        if os.path.isfile(wanted):
            return wanted
        output = gdb.execute("info sources", to_string=True)
        for name in re.split(r"[,\s]+", output):
            if name.endswith("/" + wanted) and os.path.isfile(name):
                return name
        raise gdb.GdbError("lina-break: no source file of the program ends with " + wanted)


class ValuesCommand(gdb.Command):
    """lina-values EXPR [COUNT]: the first COUNT (default 64) values of a
lina::Tensor or lina::Var, one line per slice of its last dimension, or
COUNT values from a kernel's raw pointer (const float* dout)."""

    def __init__(self):
        super().__init__("lina-values", gdb.COMMAND_DATA, gdb.COMPLETE_EXPRESSION)

    def invoke(self, arg, from_tty):
        m = re.match(r"^(.*?)(?:\s+(\d+))?\s*$", arg)
        expr, count = m.group(1), int(m.group(2) or 64)
        val = gdb.parse_and_eval(expr)
        t = val.type.strip_typedefs()
        if t.code == gdb.TYPE_CODE_PTR:  # a kernel's raw pointer: `count` values from it
            values = [float((val + i).dereference()) for i in range(count)]
            print("%s (%s): " % (expr, val.type) + " ".join("%.4g" % x for x in values))
            return
        tag = t.unqualified().tag
        if tag == "lina::Var":
            val = shared_ptr(val["impl_"]).dereference()["data"]
        elif tag != "lina::Tensor":
            raise gdb.GdbError("lina-values: %s is a %s, not a lina::Tensor or lina::Var" % (expr, val.type))
        desc, values, norm = tensor_info(val)
        if values is None:
            print(desc)
            return
        shape = [int(d) for d in std_vector(val["shape_"])]
        width = shape[-1] if shape else 1
        print("%s |x| = %.4g" % (desc, norm))
        for start in range(0, min(count, len(values)), width):
            row = values[start:min(start + width, count)]
            print("  [%d] " % (start // width) + " ".join("%.4g" % x for x in row))


gdb.pretty_printers.append(lookup)
ValuesCommand()
BreakAtTextCommand()
gdb.execute("set print object on")  # a Node* shows the op struct it points to
gdb.execute("set print pretty on")
