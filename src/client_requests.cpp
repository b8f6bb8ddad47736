// zkcoro::client's node operations: validation of each request, its submission to the C library,
// and the copy of its result out of the C callback (whose pointers die when the callback returns).
#include "driver/client_impl.hpp"

#include <zkcoro/client.hpp>
#include <zkcoro/detail/access.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/path.hpp>

#include <fmt/format.h>

namespace zkcoro {

using detail::op_base;
using detail::op_state;

namespace {

int to_zoo_flags(create_mode m) noexcept
{
    switch (m) {
    case create_mode::persistent: return ZOO_PERSISTENT;
    case create_mode::ephemeral: return ZOO_EPHEMERAL;
    case create_mode::persistent_sequential: return ZOO_PERSISTENT_SEQUENTIAL;
    case create_mode::ephemeral_sequential: return ZOO_EPHEMERAL_SEQUENTIAL;
    case create_mode::container: return ZOO_CONTAINER;
    }
    return ZOO_PERSISTENT;
}

// Takes back the request the C library held, unlinks it from its client's registry, and gives
// its op (and, in `via`, the client it went through).
template <class Op>
std::shared_ptr<Op> take(const void* data, detail::client_impl** via = nullptr)
{
    std::unique_ptr<detail::pending_request> req(static_cast<detail::pending_request*>(const_cast<void*>(data)));
    req->impl->unlink(req.get());
    if (via)
        *via = req->impl;
    return std::static_pointer_cast<Op>(std::move(req->op));
}

template <class Op>
std::shared_ptr<Op> make_op(typename Op::handler_type h, const asio::any_io_executor& ex)
{
    auto op = detail::make_pooled<Op>(std::move(h), ex);
    op->bind_cancellation();
    return op;
}

// Checks a path; on failure logs where and why, and completes the op with invalid_path.
bool path_ok(detail::client_impl& impl, op_base& op, std::string_view path, bool sequential = false)
{
    auto p = check_path(path, sequential);
    if (p.ok())
        return true;
    impl.log(log_level::warn, p.describe(path));
    op.fail(p.ec);
    return false;
}

bool size_ok(detail::client_impl& impl, op_base& op, std::string_view data)
{
    if (data.size() <= impl.cfg.max_data_size)
        return true;
    impl.log(log_level::warn, fmt::format("node data of {} bytes exceeds max_data_size {}", data.size(),
                                          impl.cfg.max_data_size));
    op.fail(client_errc::data_too_large);
    return false;
}

// A create's state: the op plus what the callback needs to undo an abandoned create.
struct create_state final : op_state<create_result> {
    using op_state::op_state;
    create_mode mode{};
};

template <class Result>
struct watched_state final : op_state<Result> {
    using op_state<Result>::op_state;
    std::string path;
    bool watch = false;
};

// Leaves a watch on the op's path if it asked for one and its caller still waits.
template <class State>
zkcoro::watch register_watch(State& op, detail::client_impl* impl, bool child)
{
    if (!op.watch || op.abandoned || !impl)
        return {};
    auto w = detail::make_pooled<detail::watch_state>();
    w->fallback_ex = op.io_executor();
    impl->add_watch(child, op.path, w);
    return detail::access::make_watch(std::move(w));
}

}  // namespace
void client::start(op_create o, detail::any_handler<void(error_code, create_result)> h)
{
    auto op = make_op<create_state>(std::move(h), impl_->executor);
    op->mode = o.mode;
    if (!path_ok(*impl_, *op, o.path, is_sequential(o.mode)) || !size_ok(*impl_, *op, o.data))
        return;
    impl_->submit(op, [&](zhandle_t* zh, void* data) {
        return zoo_acreate2(
            zh, o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()), &impl_->acl_vector,
            to_zoo_flags(o.mode),
            [](int rc, const char* value, const Stat* st, const void* d) {
                detail::client_impl* impl = nullptr;
                auto s = take<create_state>(d, &impl);
                if (rc == ZOK && s->abandoned && needs_cleanup_if_abandoned(s->mode) && value)
                    impl->cleanup_node(value);
                if (rc != ZOK)
                    return void(s->fail(make_zk_error(rc)));
                s->complete({}, create_result{value ? value : "", detail::to_stat(st)});
            },
            data);
    });
}

void client::start(op_remove o, detail::any_handler<void(error_code)> h)
{
    auto op = make_op<op_state<>>(std::move(h), impl_->executor);
    if (!path_ok(*impl_, *op, o.path))
        return;
    impl_->submit(op, [&](zhandle_t* zh, void* data) {
        return zoo_adelete(
            zh, o.path.c_str(), o.version,
            [](int rc, const void* d) { take<op_state<>>(d)->complete(make_zk_error(rc)); }, data);
    });
}

void client::start(op_exists o, detail::any_handler<void(error_code, exists_result)> h)
{
    using state = watched_state<exists_result>;
    auto op = make_op<state>(std::move(h), impl_->executor);
    if (!path_ok(*impl_, *op, o.path))
        return;
    op->path = o.path;
    op->watch = o.watch;
    impl_->submit(op, [&](zhandle_t* zh, void* data) {
        return zoo_aexists(
            zh, o.path.c_str(), o.watch ? 1 : 0,
            [](int rc, const Stat* st, const void* d) {
                detail::client_impl* impl = nullptr;
                auto s = take<state>(d, &impl);
                if (rc != ZOK && rc != ZNONODE)
                    return void(s->fail(make_zk_error(rc)));
                exists_result r;
                if (rc == ZOK)
                    r.stat = detail::to_stat(st);
                // The server leaves an exists watch on a missing node too (it fires on create).
                r.watch = register_watch(*s, impl, false);
                s->complete({}, std::move(r));
            },
            data);
    });
}

void client::start(op_get_data o, detail::any_handler<void(error_code, data_result)> h)
{
    using state = watched_state<data_result>;
    auto op = make_op<state>(std::move(h), impl_->executor);
    if (!path_ok(*impl_, *op, o.path))
        return;
    op->path = o.path;
    op->watch = o.watch;
    impl_->submit(op, [&](zhandle_t* zh, void* data) {
        return zoo_aget(
            zh, o.path.c_str(), o.watch ? 1 : 0,
            [](int rc, const char* value, int len, const Stat* st, const void* d) {
                detail::client_impl* impl = nullptr;
                auto s = take<state>(d, &impl);
                if (rc != ZOK)
                    return void(s->fail(make_zk_error(rc)));
                data_result r;
                if (value && len > 0)
                    r.data.assign(value, static_cast<std::size_t>(len));
                r.stat = detail::to_stat(st);
                r.watch = register_watch(*s, impl, false);
                s->complete({}, std::move(r));
            },
            data);
    });
}

void client::start(op_set_data o, detail::any_handler<void(error_code, zkcoro::node_stat)> h)
{
    auto op = make_op<op_state<zkcoro::node_stat>>(std::move(h), impl_->executor);
    if (!path_ok(*impl_, *op, o.path) || !size_ok(*impl_, *op, o.data))
        return;
    impl_->submit(op, [&](zhandle_t* zh, void* data) {
        return zoo_aset(
            zh, o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()), o.version,
            [](int rc, const Stat* st, const void* d) {
                auto s = take<op_state<zkcoro::node_stat>>(d);
                if (rc != ZOK)
                    return void(s->fail(make_zk_error(rc)));
                s->complete({}, detail::to_stat(st));
            },
            data);
    });
}

void client::start(op_get_children o, detail::any_handler<void(error_code, children_result)> h)
{
    using state = watched_state<children_result>;
    auto op = make_op<state>(std::move(h), impl_->executor);
    if (!path_ok(*impl_, *op, o.path))
        return;
    op->path = o.path;
    op->watch = o.watch;
    impl_->submit(op, [&](zhandle_t* zh, void* data) {
        return zoo_aget_children2(
            zh, o.path.c_str(), o.watch ? 1 : 0,
            [](int rc, const String_vector* names, const Stat* st, const void* d) {
                detail::client_impl* impl = nullptr;
                auto s = take<state>(d, &impl);
                if (rc != ZOK)
                    return void(s->fail(make_zk_error(rc)));
                children_result r;
                if (names) {
                    r.children.reserve(static_cast<std::size_t>(names->count));
                    for (std::int32_t i = 0; i < names->count; ++i)
                        r.children.emplace_back(names->data[i]);
                }
                r.stat = detail::to_stat(st);
                r.watch = register_watch(*s, impl, true);
                s->complete({}, std::move(r));
            },
            data);
    });
}

namespace {

// A transaction's state: the C structures must live until the reply.
struct multi_state final : op_state<std::vector<multi_result>> {
    using op_state::op_state;
    std::vector<multi_op> ops;
    std::vector<zoo_op_t> c_ops;
    std::vector<zoo_op_result_t> c_results;
    std::vector<Stat> stats;
    std::vector<std::string> path_buffers;
    std::vector<bool> cleanup;  // abandoned-create cleanup per op
};

}  // namespace

void client::start(op_multi o, detail::any_handler<void(error_code, std::vector<multi_result>)> h)
{
    auto op = make_op<multi_state>(std::move(h), impl_->executor);
    auto n = o.ops.size();
    if (n == 0 || n > 10000) {
        impl_->log(log_level::warn, fmt::format("a transaction needs 1 to 10000 operations, got {}", n));
        return op->fail(client_errc::invalid_argument);
    }
    for (auto& m : o.ops) {
        bool ok = std::visit(
            [&](auto& x) {
                using T = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<T, create_op>)
                    return path_ok(*impl_, *op, x.path, is_sequential(x.mode)) && size_ok(*impl_, *op, x.data);
                else if constexpr (std::is_same_v<T, set_data_op>)
                    return path_ok(*impl_, *op, x.path) && size_ok(*impl_, *op, x.data);
                else
                    return path_ok(*impl_, *op, x.path);
            },
            m);
        if (!ok)
            return;
    }
    op->ops = std::move(o.ops);
    op->c_ops.resize(n);
    op->c_results.resize(n);
    op->stats.resize(n);
    op->path_buffers.resize(n);
    op->cleanup.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        std::visit(
            [&](auto& x) {
                using T = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<T, create_op>) {
                    // Room for the path plus a 10-digit sequence number and the chroot-free name.
                    op->path_buffers[i].assign(x.path.size() + 16, '\0');
                    op->cleanup[i] = needs_cleanup_if_abandoned(x.mode);
                    zoo_create_op_init(&op->c_ops[i], x.path.c_str(), x.data.data(),
                                       static_cast<int>(x.data.size()), &impl_->acl_vector,
                                       to_zoo_flags(x.mode), op->path_buffers[i].data(),
                                       static_cast<int>(op->path_buffers[i].size()));
                } else if constexpr (std::is_same_v<T, remove_op>) {
                    zoo_delete_op_init(&op->c_ops[i], x.path.c_str(), x.version);
                } else if constexpr (std::is_same_v<T, set_data_op>) {
                    zoo_set_op_init(&op->c_ops[i], x.path.c_str(), x.data.data(),
                                    static_cast<int>(x.data.size()), x.version, &op->stats[i]);
                } else {
                    zoo_check_op_init(&op->c_ops[i], x.path.c_str(), x.version);
                }
            },
            op->ops[i]);
    }
    impl_->submit(op, [&](zhandle_t* zh, void* data) {
        return zoo_amulti(
            zh, static_cast<int>(n), op->c_ops.data(), op->c_results.data(),
            [](int rc, const void* d) {
                detail::client_impl* impl = nullptr;
                auto s = take<multi_state>(d, &impl);
                std::vector<multi_result> results(s->ops.size());
                error_code first;
                for (std::size_t i = 0; i < s->ops.size(); ++i) {
                    auto& cr = s->c_results[i];
                    results[i].ec = make_zk_error(rc == ZOK ? ZOK : cr.err);
                    if (cr.err != ZOK && !first)
                        first = make_zk_error(cr.err);
                    if (rc == ZOK && std::holds_alternative<create_op>(s->ops[i])) {
                        results[i].path = s->path_buffers[i].c_str();
                        if (s->abandoned && s->cleanup[i])
                            impl->cleanup_node(results[i].path);
                    }
                    if (rc == ZOK && cr.stat)
                        results[i].stat = detail::to_stat(cr.stat);
                }
                if (rc != ZOK && !first)
                    first = make_zk_error(rc);
                if (rc != ZOK && (rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
                                  rc == ZOPERATIONTIMEOUT))
                    return void(s->fail(make_zk_error(rc)));
                s->complete(first, std::move(results));
            },
            data);
    });
}
}  // namespace zkcoro
