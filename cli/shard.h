// Which slice of a campaign this process checks: `attncheck check --shard I/N`, or the index and count the job's
// runner gives it — so that a CI matrix, a Kubernetes Indexed Job, a Slurm array or a Bazel/GTest sharded test runs
// the shards without a scheduler of ours, and `attncheck merge` joins their partial reports.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace attncheck::cli {

struct ShardChoice {
  int index = 1, count = 1;  ///< I (1-based) of N
  std::string source;        ///< where it came from: "--shard", or the environment variables read
};

/// "I/N" with 1 ≤ I ≤ N; nullopt with *error (one line) otherwise.
std::optional<ShardChoice> parse_shard(std::string_view text, std::string *error);

/// The shard the environment names, in this order: ATTNCHECK_SHARD=I/N (a CI matrix); TEST_SHARD_INDEX (0-based) of
/// TEST_TOTAL_SHARDS (Bazel, GTest); (SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP of SLURM_ARRAY_TASK_COUNT
/// (a Slurm array); JOB_COMPLETION_INDEX (0-based; a Kubernetes Indexed Job) of ATTNCHECK_SHARD_COUNT (the Job's
/// completions). nullopt when none is set; nullopt with *error when one is set but malformed.
std::optional<ShardChoice> shard_from_environment(std::string *error);

}  // namespace attncheck::cli
