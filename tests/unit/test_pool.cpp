// The recycled memory of async/pool.hpp and the recycling map of the engine: pure logic.
#include "async/pool.hpp"
#include "async/recycling_map.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

using zkcoro::detail::block_cache;
using zkcoro::detail::make_pooled;
using zkcoro::detail::recycling_map;

namespace {

struct counted {
    static inline int alive = 0;
    explicit counted(int v) : value(v) { ++alive; }
    ~counted() { --alive; }
    int value;
    char payload[100] = {};
};

}  // namespace

TEST_CASE("a freed block is reused by the next allocation of its size class on the thread")
{
    void* a = block_cache::allocate(100);
    block_cache::deallocate(a, 100);
    void* b = block_cache::allocate(120);  // the same class (65..128 bytes)
#ifdef ZKCORO_POOL_DISABLED
    MESSAGE("pool disabled under AddressSanitizer: every block comes from the heap");
#else
    CHECK(b == a);
#endif
    void* c = block_cache::allocate(100);  // the class is empty again: a new block
    CHECK(c != b);
    block_cache::deallocate(b, 120);
    block_cache::deallocate(c, 100);
    // Larger than the largest class: straight to the heap and back.
    void* big = block_cache::allocate(4096);
    block_cache::deallocate(big, 4096);
}

TEST_CASE("pooled shared objects are constructed, destroyed and their blocks kept")
{
    {
        auto p = make_pooled<counted>(7);
        CHECK(p->value == 7);
        CHECK(counted::alive == 1);
        std::weak_ptr<counted> w = p;
        p.reset();
        CHECK(counted::alive == 0);
        CHECK(w.expired());
    }
    // Many alive at once, more than a class keeps: the rest go back to the heap.
    std::vector<std::shared_ptr<counted>> many;
    for (int i = 0; i < 200; ++i)
        many.push_back(make_pooled<counted>(i));
    CHECK(counted::alive == 200);
    for (int i = 0; i < 200; ++i)
        CHECK(many[static_cast<std::size_t>(i)]->value == i);
    many.clear();
    CHECK(counted::alive == 0);
}

TEST_CASE("a block freed on another thread, and blocks kept by a thread that ends")
{
    auto p = make_pooled<counted>(1);
    std::thread t([q = std::move(p)]() mutable {
        auto mine = make_pooled<counted>(2);
        q.reset();      // kept by this thread's cache
        mine.reset();
    });                 // the thread ends: its cache is freed (LeakSanitizer would report otherwise)
    t.join();
    CHECK(counted::alive == 0);
}

TEST_CASE("the recycling map inserts, finds and erases as a map, reusing the erased node")
{
    recycling_map<unsigned long, std::shared_ptr<int>> m;
    CHECK(m.empty());
    m[1] = std::make_shared<int>(10);
    m[2] = std::make_shared<int>(20);
    CHECK(m.size() == 2);
    REQUIRE(m.find(1) != m.end());
    CHECK(*m.find(1)->second == 10);
    std::weak_ptr<int> gone = m.find(1)->second;
    m.erase(m.find(1));
    CHECK(gone.expired());  // the value goes with its entry, though the node is kept
    CHECK(m.find(1) == m.end());
    CHECK(m.size() == 1);
    // The next insertion takes the kept node, with a fresh (default) value.
    auto& v = m[3];
    CHECK_FALSE(v);
    v = std::make_shared<int>(30);
    CHECK(*m.find(3)->second == 30);
    CHECK(m.erase(2) == 1);
    CHECK(m.erase(2) == 0);
    CHECK(m.erase(99) == 0);
    CHECK(m.size() == 1);
    // Existing keys are not replaced by operator[].
    CHECK(*m[3] == 30);
}

TEST_CASE("the recycling map's take: the value is handed out before the entry goes, and a vector keeps its capacity")
{
    recycling_map<std::string, std::vector<int>> m;
    m["/locks/a"].push_back(1);
    m["/locks/a"].push_back(2);
    std::vector<int> seen;
    m.take(m.find("/locks/a"), [&](std::vector<int>& v) {
        seen = v;
        m["/locks/b"].push_back(3);  // inserting from inside take: the map is usable there
    });
    CHECK(seen == std::vector<int>{1, 2});
    CHECK(m.find("/locks/a") == m.end());
    REQUIRE(m.find("/locks/b") != m.end());
    m.erase(m.find("/locks/b"));
    // The kept node comes back empty, with the capacity its vector had.
    auto& v = m["/locks/c"];
    CHECK(v.empty());
    CHECK(v.capacity() >= 1);
    m.clear();
    CHECK(m.empty());
}
