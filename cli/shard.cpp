#include "shard.h"

#include <fmt/core.h>

#include <charconv>
#include <cstdlib>

namespace attncheck::cli {

namespace {

/// The most shards: a campaign has far fewer items.
constexpr long kMaxShards = 1 << 20;

std::optional<long> integer(std::string_view s) {
  long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

const char *env(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : nullptr;
}

/// A shard from a 0-based index and a count, as runners give them.
/// Slurm numbers its tasks from SLURM_ARRAY_TASK_MIN by SLURM_ARRAY_TASK_STEP: index = (id − offset) / step.
std::optional<ShardChoice> from_zero_based(const char *index_var, const char *count_var, long offset,
                                           std::string *error, long step = 1) {
  auto i = integer(env(index_var));
  const auto n = integer(env(count_var));
  if (i && step > 0 && (*i - offset) % step == 0) i = offset + (*i - offset) / step;
  if (!i || !n || *n < 1 || *n > kMaxShards || *i - offset < 0 || *i - offset >= *n) {
    *error = fmt::format("{}={} and {}={} do not name a shard (an index from 0 below the count)", index_var,
                         env(index_var), count_var, env(count_var));
    return std::nullopt;
  }
  return ShardChoice{static_cast<int>(*i - offset + 1), static_cast<int>(*n),
                     std::string(index_var) + ", " + count_var};
}

}  // namespace

std::optional<ShardChoice> parse_shard(std::string_view text, std::string *error) {
  const std::size_t slash = text.find('/');
  const auto i = slash == std::string_view::npos ? std::nullopt : integer(text.substr(0, slash));
  const auto n = slash == std::string_view::npos ? std::nullopt : integer(text.substr(slash + 1));
  if (!i || !n || *n < 1 || *n > kMaxShards || *i < 1 || *i > *n) {
    *error = fmt::format("'{}' is not a shard: give I/N with 1 <= I <= N (e.g. 2/4)", text);
    return std::nullopt;
  }
  return ShardChoice{static_cast<int>(*i), static_cast<int>(*n), "--shard"};
}

std::optional<ShardChoice> shard_from_environment(std::string *error) {
  if (const char *s = env("ATTNCHECK_SHARD")) {
    auto c = parse_shard(s, error);
    if (!c) *error = "ATTNCHECK_SHARD: " + *error;
    else c->source = "ATTNCHECK_SHARD";
    return c;
  }
  if (env("TEST_TOTAL_SHARDS") && env("TEST_SHARD_INDEX"))
    return from_zero_based("TEST_SHARD_INDEX", "TEST_TOTAL_SHARDS", 0, error);
  if (env("SLURM_ARRAY_TASK_COUNT") && env("SLURM_ARRAY_TASK_ID")) {
    const auto min = env("SLURM_ARRAY_TASK_MIN") ? integer(env("SLURM_ARRAY_TASK_MIN")) : std::optional<long>(0);
    const auto step = env("SLURM_ARRAY_TASK_STEP") ? integer(env("SLURM_ARRAY_TASK_STEP")) : std::optional<long>(1);
    return from_zero_based("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", min.value_or(0), error, step.value_or(1));
  }
  if (env("JOB_COMPLETION_INDEX") && env("ATTNCHECK_SHARD_COUNT"))
    return from_zero_based("JOB_COMPLETION_INDEX", "ATTNCHECK_SHARD_COUNT", 0, error);
  return std::nullopt;
}

}  // namespace attncheck::cli
