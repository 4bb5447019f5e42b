#include "jobs.h"

#include "attncheck/containment.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
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
  const containment::SpawnLock lock;
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("--jobs: fork: ") + std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // a worker outlives no parent (killed, crashed): it would compute for nobody
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
  containment::register_child(pid);
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

/// "B,Hq,Hkv,Lq,Lk,D,Dv".
std::string shape_word(const Shape &s) {
  return std::to_string(s.B) + "," + std::to_string(s.Hq) + "," + std::to_string(s.Hkv) + "," + std::to_string(s.Lq) +
         "," + std::to_string(s.Lk) + "," + std::to_string(s.D) + "," + std::to_string(s.Dv);
}
/// The shape words left in `in`, into `shapes` (each once); false when one is garbled.
bool read_shapes(std::istream &in, std::vector<Shape> &shapes) {
  for (std::string word; in >> word;) {
    Shape s;
    char c[6];
    std::istringstream w(word);
    if (!(w >> s.B >> c[0] >> s.Hq >> c[1] >> s.Hkv >> c[2] >> s.Lq >> c[3] >> s.Lk >> c[4] >> s.D >> c[5] >> s.Dv))
      return false;
    merge_shapes(shapes, {s});
  }
  return true;
}

/// A "done" message at the front of `buf`, consumed.
struct Message {
  std::size_t index = 0;
  std::string json;
  std::vector<Shape> hung;
};
/// A complete "done <index> <bytes> <hung>…\n<json>" message at the front of `buf`, consumed. A "times" line before
/// it is consumed into `times`.
std::optional<Message> take_message(std::string &buf, ExecKernel::CallTimes &times) {
  std::size_t nl = buf.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  const auto garbled = [&] {
    return std::runtime_error("--jobs: a worker answered '" + buf.substr(0, std::min<std::size_t>(nl, 80)) + "'");
  };
  std::istringstream head(buf.substr(0, nl));
  std::string word;
  head >> word;
  if (word == "times") {
    ExecKernel::CallTimes t;
    if (!(head >> t.first_calls >> t.first_seconds >> t.other_calls >> t.other_seconds)) throw garbled();
    times += t;
    buf.erase(0, nl + 1);
    return take_message(buf, times);
  }
  Message m;
  std::size_t bytes = 0;
  if (!(head >> m.index >> bytes) || word != "done" || !read_shapes(head, m.hung)) throw garbled();
  if (buf.size() < nl + 1 + bytes) return std::nullopt;
  m.json = buf.substr(nl + 1, bytes);
  buf.erase(0, nl + 1 + bytes);
  return m;
}

std::string item_line(std::size_t index, const WorkItem &it, const std::vector<Shape> &hung) {
  const auto end_ms = std::chrono::duration_cast<std::chrono::milliseconds>(it.end.time_since_epoch()).count();
  std::string line = "item " + std::to_string(index) + " " + std::to_string(it.kernel) + " " +
                     std::string(dtype_name(it.dtype)) + " " + it.property + " " + std::to_string(end_ms);
  for (const Shape &s : hung) {
    line += ' ';
    line += shape_word(s);
  }
  line += '\n';
  return line;
}

}  // namespace

std::vector<reporting::Run> run_on_workers(const std::vector<std::string> &worker_command,
                                           const std::vector<WorkItem> &items, int jobs,
                                           const std::atomic<bool> &cancel, std::vector<bool> &done,
                                           const OnItemDone &on_done, ExecKernel::CallTimes &times) {
  std::vector<reporting::Run> runs(items.size());
  done.assign(items.size(), false);
  std::map<std::size_t, std::vector<Shape>> hung;  // by kernel: what the workers report
  std::vector<Worker> workers;
  const int n = std::max(1, std::min<int>(jobs, static_cast<int>(items.size())));
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / n);
  for (int w = 0; w < n; ++w) workers.push_back(spawn(worker_command, threads));
  std::size_t next = 0;
  bool forwarded = false;
  auto give = [&](std::size_t k) {
    Worker &w = workers[k];
    if (cancel.load() || next >= items.size()) {
      if (w.to >= 0) close(w.to);  // no more items: the worker exits
      w.to = -1;
      return;
    }
    w.item = next;
    if (!write_all(w.to, item_line(next, items[next], hung[items[next].kernel])))
      throw std::runtime_error("--jobs: a worker stopped reading its items");
    ++next;
  };
  for (std::size_t k = 0; k < workers.size(); ++k) give(k);

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
        containment::forget_child(w.pid);
        w.pid = -1;
        --alive;
        if (w.item && !cancel.load())
          throw std::runtime_error("--jobs: a worker died while checking " + items[*w.item].property +
                                   (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")"
                                                        : " (exit status " + std::to_string(WEXITSTATUS(status)) + ")"));
        continue;
      }
      w.buffer.append(chunk, static_cast<std::size_t>(got));
      while (auto msg = take_message(w.buffer, times)) {
        const std::size_t index = msg->index;
        if (index >= items.size()) throw std::runtime_error("--jobs: a worker reported an unknown item");
        merge_shapes(hung[items[index].kernel], msg->hung);
        reporting::Document d = reporting::from_json(msg->json);
        if (d.runs.size() != 1) throw std::runtime_error("--jobs: a worker's report has no single run");
        runs[index] = std::move(d.runs[0]);
        done[index] = true;
        w.item.reset();
        on_done(index, runs[index]);
        give(k);
      }
    }
  }
  return runs;
}

void merge_shapes(std::vector<Shape> &shapes, const std::vector<Shape> &more) {
  for (const Shape &s : more)
    if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(s);
}

int serve_items(const std::function<ItemResult(const WorkItem &)> &run_item,
                const std::function<std::optional<ExecKernel::CallTimes>()> &call_times) {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string word, dtype;
    std::size_t index = 0;
    WorkItem it;
    long long end_ms = 0;
    if (!(in >> word >> index >> it.kernel >> dtype >> it.property >> end_ms) || word != "item" ||
        !read_shapes(in, it.hung))
      return 2;
    it.dtype = parse_dtype(dtype);
    it.end = std::chrono::steady_clock::time_point(std::chrono::milliseconds(end_ms));
    ItemResult r = run_item(it);
    reporting::Document d;
    d.runs.push_back(std::move(r.run));
    const std::string json = reporting::to_json(d);
    std::cout << "done " << index << " " << json.size();
    for (const Shape &s : r.hung) std::cout << " " << shape_word(s);
    std::cout << "\n" << json << std::flush;
  }
  if (const auto t = call_times()) {
    std::ostringstream line;
    line.precision(17);
    line << "times " << t->first_calls << " " << t->first_seconds << " " << t->other_calls << " " << t->other_seconds
         << "\n";
    std::cout << line.str() << std::flush;
  }
  return 0;
}

}  // namespace attncheck::cli
