// The Redis read-write lock's side of a backend (internal; redis/shared_lock.cpp).
#ifndef ZKCORO_SRC_REDIS_SHARED_LOCK_HPP
#define ZKCORO_SRC_REDIS_SHARED_LOCK_HPP

#include "redis/shared_scripts.hpp"

#include <chrono>
#include <string>

namespace zkcoro::detail {

// One side of a read-write lock (redis_shared_mutex): the keys beside the write key (which is
// the lock's key) under its prefix P (fair_prefix), and the side's own settings.
struct rw_keys {
    std::string readers;  // P:readers: value -> the server's time (ms) its read lease ends at
    std::string writers;  // P:writers: value -> the server's time (ms) its waiting mark runs out
    std::string tag;      // ":<n>": this lock object among the process's (both sides share it)
    bool write = false;   // the write side
    std::chrono::milliseconds writer_timeout{0};
};

}  // namespace zkcoro::detail

#endif
