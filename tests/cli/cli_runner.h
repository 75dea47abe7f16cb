#pragma once
// Runs the built `diffattn` binary in a child process and captures its exit code, stdout and
// stderr, with control over the child's environment.

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

extern char** environ;

namespace diffattn::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;

  // stdout parsed as JSON; a discarded value when it is not JSON.
  nlohmann::json json() const { return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false); }
};

// The environment of this process with `overrides` applied (nullopt removes a variable).
// DIFFUSION_ATTENTION_BACKEND is removed unless overridden, so the caller's shell cannot leak in.
inline std::vector<std::string> child_environment(const std::map<std::string, std::optional<std::string>>& overrides) {
  std::map<std::string, std::optional<std::string>> all = {{"DIFFUSION_ATTENTION_BACKEND", std::nullopt}};
  for (const auto& [k, v] : overrides) all[k] = v;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('='));
    if (all.count(key) == 0) env.push_back(entry);
  }
  for (const auto& [k, v] : all) {
    if (v) env.push_back(k + "=" + *v);
  }
  return env;
}

inline void drain(int fd, std::string& into, bool& open) {
  std::array<char, 4096> buffer{};
  const ssize_t n = read(fd, buffer.data(), buffer.size());
  if (n <= 0) {
    open = false;
    return;
  }
  into.append(buffer.data(), static_cast<std::size_t>(n));
}

// Runs the tool with `args`; `cwd`, when given, is the child's working directory.
inline CliResult run_cli(const std::vector<std::string>& args,
                         const std::map<std::string, std::optional<std::string>>& env_overrides = {},
                         const std::string& cwd = "") {
  CliResult result;
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) return result;

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());

  std::vector<std::string> argv_storage = {DIFFATTN_CLI_PATH};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = child_environment(env_overrides);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, DIFFATTN_CLI_PATH, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (spawned != 0) {
    result.err = std::string("posix_spawn failed: ") + std::strerror(spawned);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return result;
  }

  // Both pipes are read together so that a child filling one of them cannot block.
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    std::array<pollfd, 2> fds = {pollfd{out_open ? out_pipe[0] : -1, POLLIN, 0},
                                 pollfd{err_open ? err_pipe[0] : -1, POLLIN, 0}};
    if (poll(fds.data(), fds.size(), -1) < 0) break;
    if (fds[0].revents != 0) drain(out_pipe[0], result.out, out_open);
    if (fds[1].revents != 0) drain(err_pipe[0], result.err, err_open);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);

  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

inline std::string platform_file(const std::string& name) {
  return std::string(DIFFATTN_TEST_DATA_DIR) + "/platforms/" + name;
}

}  // namespace diffattn::testing
