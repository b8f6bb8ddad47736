// Recycled memory for what every lock cycle makes and frees (internal): operation states, the
// acquisition's entry, the held node's state, the I/O loop's handlers. A block freed on a thread
// is kept there, by size class, for the next allocation of its class on that thread, with no call
// to malloc; a few blocks per class at most. Under AddressSanitizer every block goes straight to
// the heap, so that a use after free is still caught.
#ifndef ZKCORO_SRC_ASYNC_POOL_HPP
#define ZKCORO_SRC_ASYNC_POOL_HPP

#include <zkcoro/detail/config.hpp>

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/execution/allocator.hpp>
#include <boost/asio/execution/blocking.hpp>
#include <boost/asio/execution/relationship.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/require.hpp>

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

#if defined(__SANITIZE_ADDRESS__)
#define ZKCORO_POOL_DISABLED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZKCORO_POOL_DISABLED 1
#endif
#endif

// The initial-exec TLS model, for our own small thread-locals on the hot path (this cache and the
// driver's lock depth): in a shared library a thread-local is reached by default through a call to
// __tls_get_addr, about 35 instructions with its call site; initial-exec makes it one load off the
// thread pointer. A lock cycle reaches them about 30 times (callgrind). Their bytes (about 120)
// come from the static TLS block's surplus, which glibc keeps for libraries loaded later with
// dlopen (a few hundred bytes to spare: tests/unit/test_dlopen.cpp loads the library that way).
#define ZKCORO_TLS_INITIAL_EXEC __attribute__((tls_model("initial-exec")))

namespace zkcoro::detail {

class block_cache {
public:
    static constexpr std::size_t granule = 64;   // class k holds blocks of (k + 1) * granule bytes
    static constexpr std::size_t classes = 8;    // up to 512 bytes; larger ones go to the heap
    static constexpr unsigned per_class = 32;    // blocks kept per class and thread

    static void* allocate(std::size_t n)
    {
        const std::size_t k = class_of(n);
#ifndef ZKCORO_POOL_DISABLED
        if (k < classes) {
            auto& c = tls_;
            if (auto* b = c.heads[k]) {
                c.heads[k] = b->next;
                --c.counts[k];
                return b;
            }
        }
#endif
        return ::operator new(k < classes ? (k + 1) * granule : n);
    }

    static void deallocate(void* p, std::size_t n) noexcept
    {
#ifndef ZKCORO_POOL_DISABLED
        const std::size_t k = class_of(n);
        auto& c = tls_;
        if (k < classes && c.state != gone && c.counts[k] < per_class) {
            if (c.state == fresh)
                adopt();
            c.heads[k] = ::new (p) free_block{c.heads[k]};
            ++c.counts[k];
            return;
        }
#else
        (void)n;
#endif
        ::operator delete(p);
    }

private:
    struct free_block {
        free_block* next;
    };
    enum : unsigned char { fresh, alive, gone };

    // Trivial, so a thread's cache needs no guard and can be read at any time, even while the
    // thread's other thread-locals are destroyed (after the reaper, nothing is kept).
    struct cache {
        free_block* heads[classes];
        unsigned counts[classes];
        unsigned char state;
    };

    // Frees the thread's cached blocks when the thread ends; made at the first block kept.
    struct reaper {
        ~reaper()
        {
            auto& c = tls_;
            c.state = gone;
            for (auto*& h : c.heads)
                while (h) {
                    auto* next = h->next;
                    ::operator delete(h);
                    h = next;
                }
        }
    };

    static void adopt() noexcept
    {
        thread_local reaper r;
        (void)r;
        tls_.state = alive;
    }

    static std::size_t class_of(std::size_t n) noexcept { return n == 0 ? 0 : (n - 1) / granule; }

    static thread_local cache tls_ ZKCORO_TLS_INITIAL_EXEC;
};

inline thread_local block_cache::cache block_cache::tls_ ZKCORO_TLS_INITIAL_EXEC{};

// An allocator on block_cache, for std::allocate_shared and Asio's associated allocator.
template <class T>
struct pool_allocator {
    using value_type = T;

    pool_allocator() noexcept = default;
    template <class U>
    pool_allocator(const pool_allocator<U>&) noexcept
    {
    }

    T* allocate(std::size_t n)
    {
        static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned types are not pooled");
        return static_cast<T*>(block_cache::allocate(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t n) noexcept { block_cache::deallocate(p, n * sizeof(T)); }

    template <class U>
    bool operator==(const pool_allocator<U>&) const noexcept
    {
        return true;
    }
};

// A completion handler whose memory (Asio's operation, a type-erased handler) is recycled.
template <class F>
auto pooled(F&& f)
{
    return asio::bind_allocator(pool_allocator<void>(), std::forward<F>(f));
}

// asio::dispatch and asio::post of a function on an executor of a known type (an io_context's, a
// strand's), its memory recycled as pooled() does, without the work_dispatcher that asio::dispatch
// and asio::post wrap a handler with an associated allocator in (the allocator binder counts as an
// associated executor to them): that wrapper tracked work on the same executor and dispatched a
// second time. The function runs on `ex`, which counts it as work while it is queued.
template <class Ex, class F>
void dispatch_pooled(const Ex& ex, F&& f)
{
    asio::prefer(ex, asio::execution::blocking.possibly, asio::execution::allocator(pool_allocator<void>()))
        .execute(std::forward<F>(f));
}

template <class Ex, class F>
void post_pooled(const Ex& ex, F&& f)
{
    asio::prefer(asio::require(ex, asio::execution::blocking.never), asio::execution::relationship.fork,
                 asio::execution::allocator(pool_allocator<void>()))
        .execute(std::forward<F>(f));
}

// std::make_shared, in a recycled block.
template <class T, class... A>
std::shared_ptr<T> make_pooled(A&&... a)
{
    return std::allocate_shared<T>(pool_allocator<T>{}, std::forward<A>(a)...);
}

}  // namespace zkcoro::detail

#endif
