// The error categories that say, per code, what an error means for a retry (internal): classify()
// asks the category, so that each backend classifies its own codes where it defines them.
#ifndef ZKCORO_SRC_ERROR_KINDS_HPP
#define ZKCORO_SRC_ERROR_KINDS_HPP

#include <zkcoro/error.hpp>

namespace zkcoro::detail {

class classifying_category : public boost::system::error_category {
public:
    // The kind of a non-zero code of this category.
    virtual error_kind kind(int code) const noexcept = 0;
};

}  // namespace zkcoro::detail

#endif
