#include "limiter/next_definition.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

namespace tessera_limiter {
namespace {

struct Search {
  const char* name;
  std::uintptr_t self;
  bool past_self = false;
  void* after = nullptr;  // first definition after the object holding `self`
  void* any = nullptr;    // first definition anywhere else
};

// The tables of one object, from its dynamic section.
struct Tables {
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  const ElfW(Half)* versions = nullptr;   // DT_VERSYM; null: unversioned
  const std::uint32_t* gnu_hash = nullptr;
  const ElfW(Word)* sysv_hash = nullptr;
};

bool Contains(const dl_phdr_info& info, std::uintptr_t address) {
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info.dlpi_phdr[i];
    const std::uintptr_t start = info.dlpi_addr + p.p_vaddr;
    if (p.p_type == PT_LOAD && address >= start && address - start < p.p_memsz) return true;
  }
  return false;
}

Tables ReadTables(const dl_phdr_info& info) {
  Tables t;
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    if (info.dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
    const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(info.dlpi_addr + info.dlpi_phdr[i].p_vaddr);
    for (; dyn->d_tag != DT_NULL; ++dyn) {
      // The loader relocates these in place on most architectures; not in the vDSO.
      std::uintptr_t ptr = dyn->d_un.d_ptr;
      if (ptr < info.dlpi_addr) ptr += info.dlpi_addr;
      switch (dyn->d_tag) {
        case DT_SYMTAB: t.symbols = reinterpret_cast<const ElfW(Sym)*>(ptr); break;
        case DT_STRTAB: t.strings = reinterpret_cast<const char*>(ptr); break;
        case DT_VERSYM: t.versions = reinterpret_cast<const ElfW(Half)*>(ptr); break;
        case DT_GNU_HASH: t.gnu_hash = reinterpret_cast<const std::uint32_t*>(ptr); break;
        case DT_HASH: t.sysv_hash = reinterpret_cast<const ElfW(Word)*>(ptr); break;
        default: break;
      }
    }
  }
  return t;
}

// (ELF32_ST_TYPE is the same macro.)
// How well symbol `index` answers: 0 not at all, 1 a hidden (non-default) version,
// 2 the default version or an unversioned definition.
int Match(const Tables& t, std::uint32_t index, const char* name) {
  const ElfW(Sym)& sym = t.symbols[index];
  if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0 || ELF64_ST_TYPE(sym.st_info) != STT_FUNC ||
      std::strcmp(t.strings + sym.st_name, name) != 0) {
    return 0;
  }
  return t.versions != nullptr && (t.versions[index] & 0x8000) != 0 ? 1 : 2;
}

std::uint32_t GnuHash(const char* name) {
  std::uint32_t h = 5381;
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(name); *p != 0; ++p) {
    h = h * 33 + *p;
  }
  return h;
}

unsigned long SysvHash(const char* name) {
  unsigned long h = 0;
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(name); *p != 0; ++p) {
    h = (h << 4) + *p;
    const unsigned long g = h & 0xf0000000;
    if (g != 0) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

// The best-matching symbol index of `name`, or 0 (the null symbol).
std::uint32_t Lookup(const Tables& t, const char* name) {
  std::uint32_t best = 0;
  int best_match = 0;
  auto consider = [&](std::uint32_t index) {
    const int m = Match(t, index, name);
    if (m > best_match) {
      best = index;
      best_match = m;
    }
  };
  if (t.gnu_hash != nullptr) {
    const std::uint32_t buckets = t.gnu_hash[0];
    const std::uint32_t offset = t.gnu_hash[1];
    const std::uint32_t bloom_words = t.gnu_hash[2];
    const auto* bucket = reinterpret_cast<const std::uint32_t*>(
        reinterpret_cast<const ElfW(Addr)*>(t.gnu_hash + 4) + bloom_words);
    const std::uint32_t* chain = bucket + buckets;
    const std::uint32_t h = GnuHash(name);
    std::uint32_t index = buckets == 0 ? 0 : bucket[h % buckets];
    if (index < offset) return 0;
    for (;; ++index) {
      const std::uint32_t entry = chain[index - offset];
      if ((entry | 1) == (h | 1)) consider(index);
      if ((entry & 1) != 0) break;
    }
  } else if (t.sysv_hash != nullptr) {
    const ElfW(Word) buckets = t.sysv_hash[0];
    const ElfW(Word)* bucket = t.sysv_hash + 2;
    const ElfW(Word)* chain = bucket + buckets;
    if (buckets == 0) return 0;
    for (ElfW(Word) index = bucket[SysvHash(name) % buckets]; index != STN_UNDEF;
         index = chain[index]) {
      consider(index);
    }
  }
  return best;
}

int Visit(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto& search = *static_cast<Search*>(data);
  if (Contains(*info, search.self)) {
    search.past_self = true;
    return 0;
  }
  const Tables tables = ReadTables(*info);
  if (tables.symbols == nullptr || tables.strings == nullptr) return 0;
  const std::uint32_t index = Lookup(tables, search.name);
  if (index == 0) return 0;
  void* address = reinterpret_cast<void*>(info->dlpi_addr + tables.symbols[index].st_value);
  if (search.any == nullptr) search.any = address;
  if (search.past_self) {
    search.after = address;
    return 1;  // stop
  }
  return 0;
}

}  // namespace

void* FindNextDefinition(const void* self, const char* name) {
  Search search;
  search.name = name;
  search.self = reinterpret_cast<std::uintptr_t>(self);
  dl_iterate_phdr(&Visit, &search);
  return search.after != nullptr ? search.after : search.any;
}

}  // namespace tessera_limiter
