// Open-addressing hash tables for the hot paths: vocabulary lookups by string and merge
// lookups by id pair. Both are built once at load and only read afterwards.
#pragma once
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::tok {

// Large tables go on 2 MiB-aligned memory marked for transparent huge pages: random probes
// into tens of MB then miss the TLB far less (a large share of load and merge time otherwise).
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t n) {
    constexpr size_t kHuge = size_t(2) << 20;
    size_t bytes = n * sizeof(T);
    if (bytes < kHuge) return static_cast<T*>(::operator new(bytes));
    bytes = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, bytes);
    if (!p) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < (size_t(2) << 20)) ::operator delete(p);
    else std::free(p);
  }
  bool operator==(const HugePageAllocator&) const { return true; }
};

inline uint64_t hash_bytes(std::string_view s) {
  // FNV-1a over 8-byte words, then a final mix: fast on the short strings of a vocabulary.
  uint64_t h = 0xcbf29ce484222325ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 32);
}

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

// string -> int32 id. Keys are copied into one arena.
class StringIdMap {
 public:
  void reserve(size_t n);
  // Inserts or overwrites; returns where the key is kept (see key_at).
  uint32_t set(std::string_view key, int32_t id) { return set(key, id, hash_bytes(key)); }
  uint32_t set(std::string_view key, int32_t id, uint64_t hash);
  std::string_view key_at(uint32_t offset, uint32_t len) const { return std::string_view(arena_).substr(offset, len); }
  // -1 when absent.
  int32_t find(std::string_view key) const { return find(key, hash_bytes(key)); }
  // With the key's hash_bytes() precomputed (see prefetch).
  int32_t find(std::string_view key, uint64_t h) const {
    if (slots_.empty()) return -1;
    uint64_t head = prefix8(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      // Keys of up to 8 bytes are decided in the slot, without touching the arena.
      if (s.hash == uint32_t(h) && s.len == key.size() && s.head == head &&
          (s.len <= 8 || std::memcmp(arena_.data() + s.off + 8, key.data() + 8, s.len - 8) == 0))
        return s.id;
    }
  }
  // Starts loading the key's slot into cache and returns its hash: bulk lookups at load time
  // prefetch a batch of keys first so that their cache misses overlap.
  uint64_t prefetch(std::string_view key) const {
    uint64_t h = hash_bytes(key);
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_]);
    return h;
  }
  size_t size() const { return count_; }
  template <class F>
  void for_each(F&& f) const {
    for (auto& s : slots_)
      if (s.id >= 0) f(std::string_view(arena_.data() + s.off, s.len), s.id);
  }

 private:
  struct Slot {
    uint64_t head = 0;  // first 8 bytes of the key, zero-padded
    uint32_t off = 0, len = 0, hash = 0;
    int32_t id = -1;
  };
  static uint64_t prefix8(std::string_view key) {
    uint64_t v = 0;
    std::memcpy(&v, key.data(), key.size() < 8 ? key.size() : 8);
    return v;
  }
  void grow();
  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  std::string arena_;
  size_t mask_ = 0, count_ = 0;
};

// (left id, right id) -> (merge rank, merged id).
class PairMap {
 public:
  struct Value {
    int32_t rank = -1, id = -1;
  };
  void reserve(size_t n);
  // A pair listed twice keeps its last entry, as in the reference.
  void insert(int32_t a, int32_t b, Value v);
  size_t size() const { return count_; }
  void prefetch(int32_t a, int32_t b) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[mix64((uint64_t(uint32_t(a)) << 32) | uint32_t(b)) & mask_]);
  }
  Value find(int32_t a, int32_t b) const {
    if (slots_.empty()) return {};
    uint64_t key = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.v.rank < 0) return {};
      if (s.key == key) return s.v;
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    Value v;
  };
  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  size_t mask_ = 0, count_ = 0;
};

}  // namespace tessera::tok
