// libzkcoro loaded with dlopen, as a language binding or a plugin host would load it, in a program
// that does not link it: the load must succeed. Our hot-path thread-locals use the initial-exec
// TLS model (async/pool.hpp), whose bytes a library loaded this way takes from the static TLS
// block's surplus; glibc refuses the load ("cannot allocate memory in static TLS block") when the
// surplus is short. Then a thread that is not the main one uses the library's symbols' TLS by
// loading it again (the same handle) and closing it.
#include <dlfcn.h>

#include <cstdio>
#include <thread>

namespace {

int check(const char* path)
{
    void* h = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        std::fprintf(stderr, "unit_dlopen: FAIL: dlopen(%s): %s\n", path, ::dlerror());
        return 1;
    }
    // A symbol of the public API resolves (zkcoro::check_path).
    if (!::dlsym(h, "_ZN6zkcoro10check_pathESt17basic_string_viewIcSt11char_traitsIcEEb")) {
        std::fprintf(stderr, "unit_dlopen: FAIL: zkcoro::check_path not found: %s\n", ::dlerror());
        ::dlclose(h);
        return 1;
    }
    ::dlclose(h);
    return 0;
}

}  // namespace

int main()
{
    int rc = check(ZKCORO_LIBRARY_PATH);
    std::thread t([&] { rc |= check(ZKCORO_LIBRARY_PATH); });
    t.join();
    if (rc == 0)
        std::printf("unit_dlopen: %s loaded with dlopen (RTLD_NOW), twice, on two threads\n", ZKCORO_LIBRARY_PATH);
    return rc;
}
