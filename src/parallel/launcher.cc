#include "parallel/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "parallel/nccl_communicator.h"

extern char** environ;

namespace diffattn::parallel {
namespace {

namespace fs = std::filesystem;

Result<int> env_int(const char* name, int min, int max) {
  const char* text = std::getenv(name);
  char* end = nullptr;
  const long v = text ? std::strtol(text, &end, 10) : 0;
  if (!text || *text == '\0' || *end != '\0' || v < min || v > max)
    return InvalidConfig(std::string(name) + "='" + (text ? text : "") + "' must be an integer in " + std::to_string(min) +
                         ".." + std::to_string(max) + "; it is set by diffattn's launcher");
  return static_cast<int>(v);
}

std::string self_executable() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

}  // namespace

Result<std::optional<RankEnvironment>> rank_environment() {
  if (!std::getenv(kRankEnv)) return std::optional<RankEnvironment>();
  RankEnvironment env;
  DIFFATTN_ASSIGN_OR_RETURN(env.world, env_int(kWorldEnv, 1, 1024));
  DIFFATTN_ASSIGN_OR_RETURN(env.rank, env_int(kRankEnv, 0, env.world - 1));
  DIFFATTN_ASSIGN_OR_RETURN(env.device, env_int(kDeviceEnv, 0, 1023));
  const char* file = std::getenv(kIdFileEnv);
  if (!file || !*file) return InvalidConfig(std::string(kIdFileEnv) + " is not set; launch ranks with diffattn's launcher");
  env.id_file = file;
  return std::optional<RankEnvironment>(env);
}

Result<std::unique_ptr<Communicator>> nccl_from_environment(const RankEnvironment& env, std::chrono::milliseconds timeout) {
  std::string id;
  if (env.rank == 0) {
    DIFFATTN_ASSIGN_OR_RETURN(id, make_nccl_unique_id());
    // Written whole, then renamed: a reader never sees half an id.
    const std::string tmp = env.id_file + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << id;
      if (!out) return InvalidInput("could not write the NCCL unique id to " + tmp);
    }
    std::error_code ec;
    fs::rename(tmp, env.id_file, ec);
    if (ec) return InvalidInput("could not publish the NCCL unique id at " + env.id_file + ": " + ec.message());
  } else {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!fs::exists(env.id_file)) {
      if (std::chrono::steady_clock::now() > deadline)
        return Internal("rank " + std::to_string(env.rank) + " waited " + std::to_string(timeout.count()) +
                        " ms for rank 0's NCCL unique id at " + env.id_file + "; did rank 0 start?");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::ifstream in(env.id_file);
    std::stringstream text;
    text << in.rdbuf();
    id = text.str();
  }
  return make_nccl_communicator(id, env.rank, env.world, env.device);
}

Result<int> launch_local_ranks(int world, const std::vector<std::string>& args, std::chrono::milliseconds grace) {
  if (world < 1 || world > 1024) return InvalidConfig("cannot launch " + std::to_string(world) + " ranks");
  const std::string exe = self_executable();
  if (exe.empty()) return Internal("cannot find this program's path (/proc/self/exe) to launch its ranks");
  char dir_template[] = "/tmp/diffattn-launch-XXXXXX";
  if (!mkdtemp(dir_template)) return Internal(std::string("mkdtemp failed: ") + std::strerror(errno));
  const std::string id_file = std::string(dir_template) + "/nccl_id";
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      for (pid_t p : pids) kill(p, SIGKILL);
      return Internal(std::string("fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      setenv(kRankEnv, std::to_string(r).c_str(), 1);
      setenv(kWorldEnv, std::to_string(world).c_str(), 1);
      setenv(kDeviceEnv, std::to_string(r).c_str(), 1);
      setenv(kIdFileEnv, id_file.c_str(), 1);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(exe.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execve(exe.c_str(), argv.data(), environ);
      _exit(127);
    }
    pids.push_back(pid);
  }
  int first_failure = 0;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  bool terminated = false;
  std::size_t running = pids.size();
  std::vector<bool> done(pids.size(), false);
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] != pid || done[i]) continue;
        done[i] = true;
        --running;
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (code != 0 && first_failure == 0) {
          first_failure = code;
          kill_at = std::chrono::steady_clock::now() + grace;
          std::fprintf(stderr, "[diffattn] rank %zu exited with %d; the other ranks get %lld ms to finish\n", i, code,
                       static_cast<long long>(grace.count()));
        }
      }
      continue;
    }
    if (kill_at && std::chrono::steady_clock::now() > *kill_at) {
      // Peers blocked in NCCL on the failed rank never return by themselves.
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) kill(pids[i], terminated ? SIGKILL : SIGTERM);
      terminated = true;
      kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::error_code ec;
  fs::remove_all(dir_template, ec);
  return first_failure;
}

}  // namespace diffattn::parallel
