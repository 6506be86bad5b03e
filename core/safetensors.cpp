#include "core/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/printable.h"

namespace lina {

// Tensor bytes are copied to and from the file as they lie in memory, which
// is the format's little-endian order only on a little-endian host.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the safetensors reader/writer assumes a little-endian host");

namespace {

// The header may not be larger than this: a bigger length field means the
// file is not a safetensors file (or is corrupt), and we refuse to allocate.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

const char* format_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::I32: return "I32";
  }
  return "?";
}

bool parse_format_dtype(const std::string& name, DType& out) {
  for (DType t : {DType::F32, DType::F64, DType::I32}) {
    if (name == format_dtype_name(t)) {
      out = t;
      return true;
    }
  }
  return false;
}

// A JSON value read from the file, quoted safely in a message (a string
// value goes through in_quotes(), core/printable.h). A list or object is
// shown only when it is flat: dumping a deeply nested value would recurse as
// deep as the file says.
std::string quote_untrusted(const nlohmann::json& value) {
  if (value.is_structured())
    for (const auto& element : value)
      if (element.is_structured()) return value.is_array() ? "(a nested list)" : "(a nested object)";
  return printable(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 80);
}

std::string offsets_str(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// ---- writing ----------------------------------------------------------------------

}  // namespace

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the entries in the order given, so the file lists the
  // tensors in the order of their data.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;

  std::vector<Tensor> host_tensors;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    check(!name.empty() && name != "__metadata__",
          "save_safetensors " + path + ": invalid tensor name '" + name + "'");
    check(names.insert(name).second,
          "save_safetensors " + path + ": tensor name '" + name + "' appears twice");
    check(tensor.defined(), "save_safetensors " + path + ": tensor '" + name + "' is undefined");
    Tensor host = tensor.to(Device::Cpu);
    uint64_t end = offset + host.nbytes();
    header[name] = {{"dtype", format_dtype_name(host.dtype())},
                    {"shape", host.shape()},
                    {"data_offsets", {offset, end}}};
    offset = end;
    host_tensors.push_back(host);
  }

  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  out += text;

  std::vector<Bytes> pieces = {{out.data(), out.size()}};  // the length field and header
  for (const Tensor& t : host_tensors) pieces.push_back({t.raw(), t.nbytes()});
  write_file_atomically(path, pieces, "checkpoint");
}

// ---- reading ------------------------------------------------------------------------

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& entry : tensors)
    if (entry.first == name) return &entry.second;
  return nullptr;
}

namespace {

// One header entry, checked against the rules that need no other entry.
struct Entry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

Error checkpoint_error(const std::string& path, const std::string& problem) {
  return Error("checkpoint " + path + ": " + problem);
}

std::string read_whole_file(const std::string& path) {
  auto fail = [&](const std::string& problem) { return checkpoint_error(path, problem); };
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw fail("file not found");
  if (std::filesystem::is_directory(path, ec)) throw fail("is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fail(std::string("cannot open: ") + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw fail("read error");
  return bytes;
}

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& value,
                  uint64_t data_bytes) {
  auto fail = [&](const std::string& problem) { return checkpoint_error(path, problem); };
  const std::string where = "tensor " + in_quotes(name) + ": ";
  if (!value.is_object()) throw fail(where + "entry is not a JSON object");
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!value.contains(field)) throw fail(where + "missing \"" + field + "\"");

  Entry e;
  e.name = name;
  const auto& dtype = value["dtype"];
  if (!dtype.is_string()) throw fail(where + "dtype is not a string");
  if (!parse_format_dtype(dtype.get<std::string>(), e.dtype))
    throw fail(where + "unsupported dtype " + quote_untrusted(dtype) + " (lina reads F32, F64, I32)");

  const auto& shape = value["shape"];
  if (!shape.is_array()) throw fail(where + "shape is not a list");
  uint64_t numel = 1;
  bool overflow = false, has_zero_dim = false;
  for (const auto& d : shape) {
    if (!d.is_number_integer() || !d.is_number_unsigned() ||
        d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      throw fail(where + "shape " + quote_untrusted(shape) + " is not a list of non-negative integers");
    uint64_t dim = d.get<uint64_t>();
    if (dim == 0) has_zero_dim = true;
    else if (numel > std::numeric_limits<uint64_t>::max() / dim) overflow = true;
    numel *= dim;
    e.shape.push_back(int64_t(dim));
  }
  if (has_zero_dim) {  // a zero dimension makes the true product 0
    numel = 0;
    overflow = false;
  }

  const auto& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned() || offsets[0].get<uint64_t>() > offsets[1].get<uint64_t>())
    throw fail(where + "data_offsets " + quote_untrusted(offsets) +
               " is not [begin, end] with 0 <= begin <= end");
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();

  const uint64_t needed = numel * dtype_size(e.dtype);
  if (overflow || needed / dtype_size(e.dtype) != numel || e.end - e.begin != needed)
    throw fail(where + "data_offsets " + offsets_str(e.begin, e.end) + " hold " +
               std::to_string(e.end - e.begin) + " bytes, but " + format_dtype_name(e.dtype) +
               " " + shape_str(e.shape) + " needs " +
               (overflow ? std::string("more than 2^64") : std::to_string(needed)));
  if (e.end > data_bytes)
    throw fail(where + "data_offsets " + offsets_str(e.begin, e.end) +
               " run past the end of the data section (" + std::to_string(data_bytes) +
               " bytes; file truncated?)");
  return e;
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  return parse_safetensors(read_whole_file(path), path);
}

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path) {
  auto fail = [&](const std::string& problem) { return checkpoint_error(path, problem); };

  if (bytes.size() < 8)
    throw fail("file is " + std::to_string(bytes.size()) +
               " bytes, too short to hold the 8-byte header length");
  uint64_t header_bytes = 0;
  for (int i = 0; i < 8; ++i) header_bytes |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  if (header_bytes > kMaxHeaderBytes)
    throw fail("header length " + std::to_string(header_bytes) +
               " is larger than 100 MB; not a safetensors file");
  if (header_bytes > bytes.size() - 8)
    throw fail("header length " + std::to_string(header_bytes) + " runs past the end of the file (" +
               std::to_string(bytes.size() - 8) + " bytes follow the length field)");

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + int64_t(header_bytes));
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    size_t bracket = what.find("] ");  // drop nlohmann's "[json.exception...]" tag
    // (nlohmann quotes the bytes it stopped at)
    throw fail("header is not valid JSON: " +
               printable(bracket == std::string::npos ? what : what.substr(bracket + 2), 160));
  }
  if (!header.is_object()) throw fail("header is not a JSON object");

  SafetensorsFile file;
  file.path = path;
  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = bytes.size() - data_start;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw fail("__metadata__ is not a JSON object");
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string())
          throw fail("__metadata__ value of " + in_quotes(key) + " is not a string: " + quote_untrusted(v));
        file.metadata[key] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, name, value, data_bytes));
  }

  // Tensors in data order; each starts at or after the end of the one before.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t last_end = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0 && entries[i].begin < entries[i - 1].end)
      throw fail("tensors " + in_quotes(entries[i - 1].name) + " " +
                 offsets_str(entries[i - 1].begin, entries[i - 1].end) + " and " +
                 in_quotes(entries[i].name) + " " + offsets_str(entries[i].begin, entries[i].end) +
                 " overlap");
    last_end = std::max(last_end, entries[i].end);
  }
  if (last_end != data_bytes)
    throw fail("data section is " + std::to_string(data_bytes) + " bytes but the tensors end at " +
               std::to_string(last_end) + " (trailing bytes after the last tensor)");

  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype, Device::Cpu);
    if (t.nbytes() > 0) std::memcpy(t.raw(), bytes.data() + data_start + e.begin, t.nbytes());
    file.tensors.emplace_back(e.name, t);
  }
  return file;
}

Tensor expect_tensor(const SafetensorsFile& file, const std::string& name, const Shape& shape,
                     DType dtype) {
  const std::string where = "checkpoint " + file.path + ": tensor " + name;
  const Tensor* t = file.find(name);
  if (!t) throw Error(where + " is missing");
  if (t->shape() != shape)
    throw Error(where + " has shape " + shape_str(t->shape()) + ", expected " + shape_str(shape));
  if (t->dtype() != dtype)
    throw Error(where + " has dtype " + dtype_name(t->dtype()) + ", expected " + dtype_name(dtype));
  return *t;
}

}  // namespace lina
