#include "jobs.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace attncheck::cli {

namespace {

/// A worker process and the item it is running.
struct Worker {
  pid_t pid = -1;
  int to = -1, from = -1;  // its stdin (we write), its stdout (we read)
  std::string buffer;      // bytes read and not yet consumed
  std::optional<std::size_t> item;
};

Worker spawn(const std::vector<std::string> &command, int threads) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error(std::string("--jobs: pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("--jobs: fork: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    // The cores are shared among the workers: a threaded kernel (OpenMP, the bundled ones) gets its share, unless
    // the user chose; oversubscribed spin-waiting threads would make N workers slower than one.
    const std::string n = std::to_string(threads);
    setenv("OMP_NUM_THREADS", n.c_str(), /*overwrite=*/0);
    setenv("ATTNCHECK_THREADS", n.c_str(), /*overwrite=*/0);
    std::vector<char *> argv;
    for (const std::string &a : command) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  fcntl(in[1], F_SETFD, FD_CLOEXEC);
  fcntl(out[0], F_SETFD, FD_CLOEXEC);
  return Worker{pid, in[1], out[0], {}, std::nullopt};
}

bool write_all(int fd, const std::string &s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

/// A complete "done <index> <bytes>\n<json>" message at the front of `buf`: its index and JSON, consumed.
std::optional<std::pair<std::size_t, std::string>> take_message(std::string &buf) {
  const std::size_t nl = buf.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  std::istringstream head(buf.substr(0, nl));
  std::string word;
  std::size_t index = 0, bytes = 0;
  if (!(head >> word >> index >> bytes) || word != "done")
    throw std::runtime_error("--jobs: a worker answered '" + buf.substr(0, std::min<std::size_t>(nl, 80)) + "'");
  if (buf.size() < nl + 1 + bytes) return std::nullopt;
  std::string json = buf.substr(nl + 1, bytes);
  buf.erase(0, nl + 1 + bytes);
  return std::make_pair(index, std::move(json));
}

}  // namespace

std::vector<reporting::Run> run_on_workers(const std::vector<std::string> &worker_command,
                                           const std::vector<WorkItem> &items, int jobs,
                                           const std::atomic<bool> &cancel, std::vector<bool> &done,
                                           const std::function<void(std::size_t, const reporting::Run &)> &on_done) {
  std::vector<reporting::Run> runs(items.size());
  done.assign(items.size(), false);
  std::vector<Worker> workers;
  const int n = std::max(1, std::min<int>(jobs, static_cast<int>(items.size())));
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / n);
  for (int w = 0; w < n; ++w) workers.push_back(spawn(worker_command, threads));
  std::size_t next = 0;
  bool forwarded = false;
  auto give = [&](Worker &w) {
    if (next >= items.size() || cancel.load()) {
      if (w.to >= 0) close(w.to);  // no more items: the worker exits
      w.to = -1;
      return;
    }
    const WorkItem &it = items[next];
    w.item = next;
    // Its share of what is left of its run's budget, as the serial engine carries unused time over: the time to the
    // run's end spread over the run's items not started yet, `jobs` at a time.
    std::size_t left = 0;
    for (std::size_t j = next; j < items.size() && items[j].end == it.end; ++j) ++left;
    const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(it.end - std::chrono::steady_clock::now());
    const auto budget = std::clamp(remaining * n / static_cast<std::int64_t>(left), std::chrono::milliseconds(1),
                                   std::max(it.budget, std::chrono::milliseconds(1)));
    const std::string line = "item " + std::to_string(next) + " " + std::to_string(it.kernel) + " " +
                             std::string(dtype_name(it.dtype)) + " " + it.property + " " +
                             std::to_string(budget.count()) + " " +
                             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                it.end.time_since_epoch()).count()) + "\n";
    ++next;
    if (!write_all(w.to, line)) throw std::runtime_error("--jobs: a worker stopped reading its items");
  };
  for (Worker &w : workers) give(w);

  std::size_t alive = workers.size();
  while (alive > 0) {
    if (cancel.load() && !forwarded) {  // the workers stop their items too, and report what they decided
      forwarded = true;
      for (Worker &w : workers)
        if (w.pid > 0) kill(w.pid, SIGINT);
    }
    std::vector<pollfd> fds;
    for (Worker &w : workers) fds.push_back({w.from, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR)
      throw std::runtime_error(std::string("--jobs: poll: ") + std::strerror(errno));
    for (std::size_t k = 0; k < workers.size(); ++k) {
      Worker &w = workers[k];
      if (w.from < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char chunk[65536];
      const ssize_t got = read(w.from, chunk, sizeof chunk);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {  // the worker exited
        close(w.from);
        w.from = -1;
        int status = 0;
        waitpid(w.pid, &status, 0);
        w.pid = -1;
        --alive;
        if (w.item && !cancel.load())
          throw std::runtime_error("--jobs: a worker died while checking " + items[*w.item].property +
                                   (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")"
                                                        : " (exit status " + std::to_string(WEXITSTATUS(status)) + ")"));
        continue;
      }
      w.buffer.append(chunk, static_cast<std::size_t>(got));
      while (auto msg = take_message(w.buffer)) {
        const auto &[index, json] = *msg;
        if (index >= items.size()) throw std::runtime_error("--jobs: a worker reported an unknown item");
        reporting::Document d = reporting::from_json(json);
        if (d.runs.size() != 1) throw std::runtime_error("--jobs: a worker's report has no single run");
        runs[index] = std::move(d.runs[0]);
        done[index] = true;
        w.item.reset();
        on_done(index, runs[index]);
        give(w);
      }
    }
  }
  return runs;
}

int serve_items(const std::function<reporting::Run(const WorkItem &)> &run_item) {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string word, dtype;
    std::size_t index = 0;
    WorkItem it;
    long long budget_ms = 0, end_ms = 0;
    if (!(in >> word >> index >> it.kernel >> dtype >> it.property >> budget_ms >> end_ms) || word != "item") return 2;
    it.dtype = parse_dtype(dtype);
    it.budget = std::chrono::milliseconds(budget_ms);
    it.end = std::chrono::steady_clock::time_point(std::chrono::milliseconds(end_ms));
    reporting::Document d;
    d.runs.push_back(run_item(it));
    const std::string json = reporting::to_json(d);
    std::cout << "done " << index << " " << json.size() << "\n" << json << std::flush;
  }
  return 0;
}

}  // namespace attncheck::cli
