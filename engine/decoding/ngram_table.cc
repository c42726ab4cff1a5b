#include "engine/decoding/ngram_table.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace crossreg {
namespace {

constexpr char kMagic[8] = {'C', 'R', 'N', 'G', 'R', 'A', 'M', '\0'};
constexpr uint32_t kVersion = 1;
constexpr int kMaxOrder = 8;

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Reads fixed-size values from a byte image, remembering whether it ran short.
class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  bool Get(T* value) {
    if (bytes_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  template <typename T>
  bool GetArray(std::vector<T>* values, uint64_t count) {
    if ((bytes_.size() - pos_) / sizeof(T) < count) return false;
    values->resize(count);
    if (count == 0) return true;  // memcpy wants non-null pointers even for 0 bytes
    std::memcpy(values->data(), bytes_.data() + pos_, count * sizeof(T));
    pos_ += count * sizeof(T);
    return true;
  }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  const std::string& bytes_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<NgramTable>> NgramTable::FromOrders(int64_t vocab_size, int bits_per_token,
                                                                   std::vector<Order> orders) {
  const int max_n = static_cast<int>(orders.size());
  if (max_n < 1 || max_n > kMaxOrder) return absl::InvalidArgumentError(absl::StrCat("max_n ", max_n, " is not in 1..", kMaxOrder));
  if (bits_per_token < 1 || bits_per_token > 32 || max_n * bits_per_token > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("bits_per_token ", bits_per_token, " does not pack ", max_n, " tokens into 64 bits"));
  }
  if (vocab_size < 1 || (bits_per_token < 32 && vocab_size > (int64_t{1} << bits_per_token))) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size ", vocab_size, " does not fit ", bits_per_token, " bits per token"));
  }
  for (int n = 1; n <= max_n; ++n) {
    const Order& order = orders[static_cast<size_t>(n - 1)];
    if (order.keys.size() != order.next.size()) {
      return absl::InvalidArgumentError(absl::StrCat("order ", n, ": ", order.keys.size(), " keys but ",
                                                     order.next.size(), " next tokens"));
    }
    const int key_bits = n * bits_per_token;
    for (size_t i = 0; i < order.keys.size(); ++i) {
      if (i > 0 && order.keys[i] <= order.keys[i - 1]) {
        return absl::InvalidArgumentError(absl::StrCat("order ", n, ": keys not strictly increasing at entry ", i));
      }
      if (key_bits < 64 && (order.keys[i] >> key_bits) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("order ", n, ": key of entry ", i, " has more than ",
                                                       key_bits, " bits"));
      }
      if (order.next[i] >= static_cast<uint64_t>(vocab_size)) {
        return absl::InvalidArgumentError(absl::StrCat("order ", n, ": next token ", order.next[i], " of entry ", i,
                                                       " is outside the vocabulary of ", vocab_size));
      }
    }
  }
  auto table = std::unique_ptr<NgramTable>(new NgramTable());
  table->vocab_size_ = vocab_size;
  table->bits_ = bits_per_token;
  table->orders_ = std::move(orders);
  return table;
}

absl::StatusOr<std::unique_ptr<NgramTable>> NgramTable::Load(const std::string& path, int64_t vocab_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("n-gram table ", path, ": cannot open the file"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return Parse(buffer.str(), vocab_size, path);
}

absl::StatusOr<std::unique_ptr<NgramTable>> NgramTable::Parse(const std::string& bytes, int64_t vocab_size,
                                                              const std::string& name) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("n-gram table ", name, ": ", why));
  };
  Reader r(bytes);
  char magic[8];
  if (!r.Get(&magic) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return fail("not an n-gram table (bad magic)");
  uint32_t version = 0, vocab = 0, max_n = 0, bits = 0;
  if (!r.Get(&version) || !r.Get(&vocab) || !r.Get(&max_n) || !r.Get(&bits)) return fail("truncated header");
  if (version != kVersion) return fail(absl::StrCat("version ", version, " (this build reads ", kVersion, ")"));
  if (max_n < 1 || max_n > kMaxOrder) return fail(absl::StrCat("max_n ", max_n, " is not in 1..", kMaxOrder));
  if (vocab_size > 0 && vocab != vocab_size) {
    return fail(absl::StrCat("built for a vocabulary of ", vocab, " tokens; the model has ", vocab_size));
  }
  std::vector<uint64_t> counts;
  if (!r.GetArray(&counts, max_n)) return fail("truncated header (entry counts)");
  std::vector<Order> orders(max_n);
  for (uint32_t n = 1; n <= max_n; ++n) {
    const uint64_t count = counts[n - 1];
    if (!r.GetArray(&orders[n - 1].keys, count) || !r.GetArray(&orders[n - 1].next, count)) {
      return fail(absl::StrCat("truncated: order ", n, " declares ", count, " entries"));
    }
  }
  if (r.remaining() != 0) return fail(absl::StrCat(r.remaining(), " bytes after the last entry"));
  auto table = FromOrders(vocab, static_cast<int>(bits), std::move(orders));
  if (!table.ok()) return fail(std::string(table.status().message()));
  return table;
}

std::string NgramTable::Serialize() const {
  std::string out(kMagic, sizeof(kMagic));
  Put<uint32_t>(out, kVersion);
  Put<uint32_t>(out, static_cast<uint32_t>(vocab_size_));
  Put<uint32_t>(out, static_cast<uint32_t>(orders_.size()));
  Put<uint32_t>(out, static_cast<uint32_t>(bits_));
  for (const Order& order : orders_) Put<uint64_t>(out, order.keys.size());
  for (const Order& order : orders_) {
    out.append(reinterpret_cast<const char*>(order.keys.data()), order.keys.size() * sizeof(uint64_t));
    out.append(reinterpret_cast<const char*>(order.next.data()), order.next.size() * sizeof(uint32_t));
  }
  return out;
}

int32_t NgramTable::Next(const int32_t* tokens, int len, int min_n, int* n_out) const {
  if (n_out != nullptr) *n_out = 0;
  for (int n = std::min(len, max_n()); n >= std::max(1, min_n); --n) {
    const Order& order = orders_[static_cast<size_t>(n - 1)];
    if (order.keys.empty()) continue;
    uint64_t key = 0;
    bool in_vocab = true;
    for (int i = len - n; i < len; ++i) {
      in_vocab &= tokens[i] >= 0 && tokens[i] < vocab_size_;
      key = (key << bits_) | static_cast<uint32_t>(tokens[i]);
    }
    if (!in_vocab) continue;
    const auto it = std::lower_bound(order.keys.begin(), order.keys.end(), key);
    if (it == order.keys.end() || *it != key) continue;
    if (n_out != nullptr) *n_out = n;
    return static_cast<int32_t>(order.next[static_cast<size_t>(it - order.keys.begin())]);
  }
  return -1;
}

int64_t NgramTable::entries() const {
  int64_t total = 0;
  for (const Order& order : orders_) total += static_cast<int64_t>(order.keys.size());
  return total;
}

}  // namespace crossreg
