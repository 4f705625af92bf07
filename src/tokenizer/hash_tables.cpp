#include "tokenizer/hash_tables.h"

namespace tessera::tok {

namespace {
// Load factor <= 2/3 keeps linear probe chains short without much memory to clear.
size_t capacity_for(size_t n) {
  size_t cap = 16;
  while (cap * 2 < n * 3) cap <<= 1;
  return cap;
}
}  // namespace

void StringIdMap::reserve(size_t n) {
  if (capacity_for(n) <= slots_.size()) return;
  auto old = std::move(slots_);
  slots_.assign(capacity_for(n), Slot{});
  mask_ = slots_.size() - 1;
  for (auto& s : old) {
    if (s.id < 0) continue;
    for (size_t i = s.hash & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].id < 0) {
        // Re-hash from the full hash: the stored 32 bits suffice while the table stays < 2^32.
        slots_[i] = s;
        break;
      }
    }
  }
}

void StringIdMap::grow() { reserve(count_ * 2 + 8); }

uint32_t StringIdMap::set(std::string_view key, int32_t id, uint64_t h) {
  if ((count_ + 1) * 3 > slots_.size() * 2) grow();
  uint64_t head = prefix8(key);
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.id < 0) {
      s.head = head;
      s.off = uint32_t(arena_.size());
      s.len = uint32_t(key.size());
      s.hash = uint32_t(h);
      s.id = id;
      arena_.append(key);
      ++count_;
      return s.off;
    }
    if (s.hash == uint32_t(h) && s.len == key.size() && s.head == head &&
        std::memcmp(arena_.data() + s.off, key.data(), s.len) == 0) {
      s.id = id;
      return s.off;
    }
  }
}

void PairMap::reserve(size_t n) {
  if (capacity_for(n) <= slots_.size()) return;
  auto old = std::move(slots_);
  slots_.assign(capacity_for(n), Slot{});
  mask_ = slots_.size() - 1;
  count_ = 0;
  for (auto& s : old)
    if (s.v.rank >= 0) insert(int32_t(s.key >> 32), int32_t(uint32_t(s.key)), s.v);
}

void PairMap::insert(int32_t a, int32_t b, Value v) {
  if ((count_ + 1) * 3 > slots_.size() * 2) reserve(count_ * 2 + 8);
  uint64_t key = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.v.rank < 0) {
      s.key = key;
      s.v = v;
      ++count_;
      return;
    }
    if (s.key == key) {
      s.v = v;
      return;
    }
  }
}

}  // namespace tessera::tok
