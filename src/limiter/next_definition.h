// Finds a function the way dlsym(RTLD_NEXT, name) would from a given object, without
// calling dlsym or dlvsym: the limiter exports both (and dlmopen), so inside it they
// would resolve to its own hooks. Walks the loaded objects (dl_iterate_phdr) and reads
// their dynamic symbol tables (GNU or SysV hash); of several versions of one name it
// returns the default one. IFUNCs are not resolved (never returned). Reentrant; takes
// the loader's object-list lock, as dl_iterate_phdr does.
#ifndef TESSERA_LIMITER_NEXT_DEFINITION_H_
#define TESSERA_LIMITER_NEXT_DEFINITION_H_

namespace tessera_limiter {

// The address of the first definition of function `name` in the objects loaded after
// the one that contains `self` (in the order the loader searches them), else in any
// object other than that one; nullptr when none defines it.
void* FindNextDefinition(const void* self, const char* name);

}  // namespace tessera_limiter

#endif  // TESSERA_LIMITER_NEXT_DEFINITION_H_
