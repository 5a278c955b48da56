#include "sim/tools/npy.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace vtpu::tools {

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int dtype_bytes(const std::string& dtype) {
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "bf16") return 2;
  if (dtype == "i8") return 1;
  throw std::runtime_error(fmt::format("unknown dtype '{}' (f32, bf16, i32, i8)", dtype));
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", path));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) {
    throw std::runtime_error(fmt::format("'{}' is not a .npy file", path));
  }
  const int major = bytes[6];
  size_t header_len, offset;
  if (major == 1) {
    header_len = bytes[8] | (bytes[9] << 8);
    offset = 10;
  } else {
    if (bytes.size() < 12) throw std::runtime_error(fmt::format("'{}': truncated header", path));
    header_len = bytes[8] | (bytes[9] << 8) | (size_t(bytes[10]) << 16) | (size_t(bytes[11]) << 24);
    offset = 12;
  }
  if (offset + header_len > bytes.size()) throw std::runtime_error(fmt::format("'{}': truncated header", path));
  const std::string header(bytes.begin() + offset, bytes.begin() + offset + header_len);
  auto field = [&](const std::string& key) {
    const size_t k = header.find("'" + key + "'");
    if (k == std::string::npos) throw std::runtime_error(fmt::format("'{}': header lacks '{}'", path, key));
    return header.substr(header.find(':', k) + 1);
  };
  const std::string descr_part = field("descr");
  const size_t q1 = descr_part.find('\''), q2 = descr_part.find('\'', q1 + 1);
  const std::string descr = descr_part.substr(q1 + 1, q2 - q1 - 1);
  if (field("fortran_order").find("True") < field("fortran_order").find(',')) {
    throw std::runtime_error(fmt::format("'{}': Fortran-order arrays are not supported", path));
  }
  NpyArray a;
  const std::string shape_part = field("shape");
  const size_t p1 = shape_part.find('('), p2 = shape_part.find(')');
  std::string dims = shape_part.substr(p1 + 1, p2 - p1 - 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    const size_t comma = dims.find(',', pos);
    const std::string tok = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok.find_first_of("0123456789") != std::string::npos) a.shape.push_back(std::stoll(tok));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  const uint8_t* raw = bytes.data() + offset + header_len;
  const size_t raw_bytes = bytes.size() - offset - header_len;
  const int64_t n = a.elements();
  auto need = [&](size_t elem) {
    if (raw_bytes < size_t(n) * elem) throw std::runtime_error(fmt::format("'{}': data shorter than its shape", path));
  };
  if (descr == "<f4" || descr == "<i4" || descr == "|i1" || descr == "|u1") {
    const size_t elem = descr[2] == '4' ? 4 : 1;
    need(elem);
    a.dtype = descr == "<f4" ? "f32" : elem == 4 ? "i32" : "i8";
    a.data.assign(raw, raw + n * elem);
  } else if (descr == "<f8") {
    need(8);
    a.dtype = "f32";
    a.data.resize(n * 4);
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, raw + 8 * i, 8);
      const float f = static_cast<float>(d);
      std::memcpy(a.data.data() + 4 * i, &f, 4);
    }
  } else if (descr == "<i8") {
    need(8);
    a.dtype = "i32";
    a.data.resize(n * 4);
    for (int64_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, raw + 8 * i, 8);
      const int32_t w = static_cast<int32_t>(v);
      std::memcpy(a.data.data() + 4 * i, &w, 4);
    }
  } else {
    throw std::runtime_error(fmt::format("'{}': unsupported dtype '{}'", path, descr));
  }
  return a;
}

void write_npy(const std::string& path, const NpyArray& a) {
  const std::string descr = a.dtype == "f32" ? "<f4" : a.dtype == "i32" ? "<i4" : "|i1";
  std::string shape;
  for (int64_t d : a.shape) shape += fmt::format("{}, ", d);
  if (a.shape.size() > 1) shape.resize(shape.size() - 2);
  else if (a.shape.size() == 1) shape.pop_back();
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(fmt::format("cannot write '{}'", path));
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.put(static_cast<char>(len & 0xff));
  out.put(static_cast<char>(len >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(a.data.data()), static_cast<std::streamsize>(a.data.size()));
}

}  // namespace vtpu::tools
