// Fuzz target for the queue order of the lock recipes: sequence_key, sort_by_sequence (mutex,
// semaphore) and sort_read_write (read-write lock). The input is text: the first line is a
// marker, every further line a child name (at most 256 of them). The seed corpus holds listings
// such as ZooKeeper returns them, with Curator's protected names.
//
// Properties checked for each sort (with the fuzzed marker, "lock-" and "lease-"):
// - the result is a permutation of the input;
// - it is ordered: no name's key is smaller than its predecessor's;
// - it is stable: names with equal keys keep their input order;
// - sorting again changes nothing.
// sequence_key returns a suffix of the name: what follows the last occurrence of the marker, or
// the whole name without it. For sort_read_write the key is the text after the last "__READ__",
// else after the last "__WRIT__", else the whole name, and a write node (one whose name contains
// "__WRIT__") comes before a read node with the same key.
#include "fuzz_check.hpp"

#include <zkcoro/mutex.hpp>
#include <zkcoro/shared_mutex.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::size_t max_names = 256;

// What the documentation says the read-write order compares: the key, then writes first.
struct rw_rank {
    std::string_view key;
    bool read = false;  // false sorts first: a write node before a read node
    bool operator<(const rw_rank& o) const { return key != o.key ? key < o.key : read < o.read; }
};

rw_rank read_write_rank(std::string_view name)
{
    bool write = name.find("__WRIT__") != std::string_view::npos;
    std::string_view key = name.find("__READ__") != std::string_view::npos ? zkcoro::sequence_key(name, "__READ__")
                                                                          : zkcoro::sequence_key(name, "__WRIT__");
    return {key, !write};
}

// Checks that `sorted` is `input` sorted stably by `rank` (a map from a name to something with
// operator<), and that sorting it again with `sort` changes nothing.
template <class Rank>
void check_sorted(const std::vector<std::string>& input, const std::vector<std::string>& sorted, Rank rank,
                  const std::function<void(std::vector<std::string>&)>& sort)
{
    FUZZ_CHECK(sorted.size() == input.size());
    // A permutation: the same names, as many times each.
    auto a = input, b = sorted;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    FUZZ_CHECK(a == b);
    // Ordered.
    for (std::size_t i = 1; i < sorted.size(); ++i)
        FUZZ_CHECK(!(rank(sorted[i]) < rank(sorted[i - 1])));
    // Stable: equal ranks keep their input order. That leaves a single possible result: the
    // input stably sorted by the documented rank (sequence_key, itself checked against its
    // definition, or read_write_rank, written here).
    auto expected = input;
    std::stable_sort(expected.begin(), expected.end(),
                     [&rank](const std::string& x, const std::string& y) { return rank(x) < rank(y); });
    FUZZ_CHECK(sorted == expected);
    // Idempotent.
    auto again = sorted;
    sort(again);
    FUZZ_CHECK(again == sorted);
}

void check_sequence_key(std::string_view name, std::string_view marker)
{
    auto key = zkcoro::sequence_key(name, marker);
    // A suffix of the name, as a view into it.
    FUZZ_CHECK(key.size() <= name.size());
    FUZZ_CHECK(key.data() + key.size() == name.data() + name.size());
    auto pos = name.rfind(marker);
    if (pos == std::string_view::npos) {
        FUZZ_CHECK(key == name);
    } else {
        // What follows the last occurrence: the marker ends right before the key, and the key
        // holds no further occurrence of it.
        FUZZ_CHECK(key.size() == name.size() - pos - marker.size());
        FUZZ_CHECK(name.substr(0, name.size() - key.size()).ends_with(marker));
        if (!marker.empty())
            FUZZ_CHECK(key.find(marker) == std::string_view::npos);
    }
}

void check_by_sequence(const std::vector<std::string>& names, std::string_view marker)
{
    for (const auto& n : names)
        check_sequence_key(n, marker);
    auto sorted = names;
    zkcoro::sort_by_sequence(sorted, marker);
    std::string m(marker);
    check_sorted(
        names, sorted, [&m](const std::string& n) { return zkcoro::sequence_key(n, m); },
        [&m](std::vector<std::string>& v) { zkcoro::sort_by_sequence(v, m); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string_view text(reinterpret_cast<const char*>(data), size);
    auto newline = text.find('\n');
    std::string_view marker = text.substr(0, newline);
    std::vector<std::string> names;
    std::string_view rest = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
    while (!rest.empty() && names.size() < max_names) {
        auto end = rest.find('\n');
        names.emplace_back(rest.substr(0, end));
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    }

    check_by_sequence(names, marker);
    check_by_sequence(names, "lock-");
    check_by_sequence(names, "lease-");

    auto sorted = names;
    zkcoro::sort_read_write(sorted);
    check_sorted(names, sorted, read_write_rank, [](std::vector<std::string>& v) { zkcoro::sort_read_write(v); });
    return 0;
}
