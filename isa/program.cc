// Binary format: "VTPU" magic, u32 version, then length-prefixed name, code words, arguments and
// data segments, all little-endian. Every read is bounds-checked so corrupt files give FormatError.
#include "isa/program.h"

#include <fmt/format.h>

#include <cstring>

namespace vtpu::isa {
namespace {

constexpr char kMagic[4] = {'V', 'T', 'P', 'U'};
constexpr uint32_t kVersion = 3;  // 2 added mxu_dim after the name, 3 a flags word after it (bit 0: multicore)
constexpr uint32_t kMaxCount = 1u << 28;  // guards allocations against corrupt length fields

class Writer {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void blob(std::span<const uint8_t> data) {
    u32(static_cast<uint32_t>(data.size()));
    bytes_.insert(bytes_.end(), data.begin(), data.end());
  }
  void str(const std::string& s) { blob({reinterpret_cast<const uint8_t*>(s.data()), s.size()}); }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  void need(size_t n) const {
    if (bytes_.size() - pos_ < n) {
      throw FormatError(fmt::format("truncated program: need {} bytes at offset {}, file has {}", n, pos_,
                                    bytes_.size()));
    }
  }
  uint8_t u8() {
    need(1);
    return bytes_[pos_++];
  }
  uint32_t u32() {
    need(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{bytes_[pos_++]} << (8 * i);
    return v;
  }
  uint64_t u64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{bytes_[pos_++]} << (8 * i);
    return v;
  }
  uint32_t count() {
    const uint32_t n = u32();
    if (n > kMaxCount) throw FormatError(fmt::format("implausible count {} at offset {}", n, pos_ - 4));
    return n;
  }
  std::vector<uint8_t> blob() {
    const uint32_t n = count();
    need(n);
    std::vector<uint8_t> out(bytes_.begin() + pos_, bytes_.begin() + pos_ + n);
    pos_ += n;
    return out;
  }
  std::string str() {
    auto b = blob();
    return {b.begin(), b.end()};
  }
  bool done() const { return pos_ == bytes_.size(); }
  size_t pos() const { return pos_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<uint8_t> serialize(const Program& program) {
  Writer w;
  for (char c : kMagic) w.u8(static_cast<uint8_t>(c));
  w.u32(kVersion);
  w.str(program.name);
  w.u32(program.mxu_dim);
  w.u32(program.multicore ? 1u : 0u);
  w.u32(static_cast<uint32_t>(program.code.size()));
  for (uint64_t word : program.code) w.u64(word);
  w.u32(static_cast<uint32_t>(program.arguments.size()));
  for (const auto& arg : program.arguments) {
    w.str(arg.name);
    w.u8(static_cast<uint8_t>(arg.kind));
  }
  w.u32(static_cast<uint32_t>(program.data.size()));
  for (const auto& seg : program.data) {
    w.u32(seg.vmem_address);
    w.blob(seg.bytes);
  }
  return w.take();
}

Program deserialize(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  for (char c : kMagic) {
    if (r.u8() != static_cast<uint8_t>(c)) throw FormatError("not a vtpu program (bad magic)");
  }
  const uint32_t version = r.u32();
  if (version < 1 || version > kVersion) throw FormatError(fmt::format("unsupported program version {}", version));
  Program p;
  p.name = r.str();
  if (version >= 2) p.mxu_dim = r.u32();
  if (version >= 3) {
    const uint32_t flags = r.u32();
    if (flags > 1) throw FormatError(fmt::format("unknown program flags {:#x}", flags));
    p.multicore = flags & 1;
  }
  const uint32_t n_code = r.count();
  p.code.reserve(n_code);
  for (uint32_t i = 0; i < n_code; ++i) {
    const size_t at = r.pos();
    const uint64_t word = r.u64();
    try {
      (void)decode(word);
    } catch (const DecodeError& e) {
      throw FormatError(fmt::format("instruction {} at offset {}: {}", i, at, e.what()));
    }
    p.code.push_back(word);
  }
  const uint32_t n_args = r.count();
  for (uint32_t i = 0; i < n_args; ++i) {
    ArgumentSpec arg;
    arg.name = r.str();
    const uint8_t kind = r.u8();
    if (kind > 1) throw FormatError(fmt::format("argument {}: bad kind {}", i, kind));
    arg.kind = static_cast<ArgumentKind>(kind);
    p.arguments.push_back(std::move(arg));
  }
  const uint32_t n_data = r.count();
  for (uint32_t i = 0; i < n_data; ++i) {
    DataSegment seg;
    seg.vmem_address = r.u32();
    seg.bytes = r.blob();
    p.data.push_back(std::move(seg));
  }
  if (!r.done()) throw FormatError(fmt::format("{} trailing bytes after program", bytes.size() - r.pos()));
  return p;
}

}  // namespace vtpu::isa
