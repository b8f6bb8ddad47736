// Symbol visibility: the library is built with hidden symbols; the public API is exported.
#ifndef ZKCORO_DETAIL_API_HPP
#define ZKCORO_DETAIL_API_HPP

#if defined(__GNUC__) && !defined(_WIN32)
#define ZKCORO_API __attribute__((visibility("default")))
#else
#define ZKCORO_API
#endif

#endif
