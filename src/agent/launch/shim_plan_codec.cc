#include "agent/launch/shim_plan_codec.h"

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace tessera {
namespace {

// Bumped whenever a field is added, so that a shim never misreads another build's plan.
constexpr uint64_t kMagic = 0x5445535348494d04ULL;  // "TESSHIM", version 4

class Writer {
 public:
  void Number(uint64_t v) {
    char b[8];
    for (int i = 0; i < 8; ++i) {
      b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    }
    out_.append(b, 8);
  }
  void Text(const std::string& s) {
    Number(s.size());
    out_ += s;
  }
  void Texts(const std::vector<std::string>& list) {
    Number(list.size());
    for (const std::string& s : list) {
      Text(s);
    }
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool Number(uint64_t* v) {
    if (in_.size() < 8) {
      return false;
    }
    *v = 0;
    for (int i = 0; i < 8; ++i) {
      *v |= static_cast<uint64_t>(static_cast<unsigned char>(in_[static_cast<size_t>(i)]))
            << (8 * i);
    }
    in_.remove_prefix(8);
    return true;
  }
  bool Text(std::string* s) {
    uint64_t n = 0;
    if (!Number(&n) || n > in_.size()) {
      return false;
    }
    s->assign(in_.substr(0, static_cast<size_t>(n)));
    in_.remove_prefix(static_cast<size_t>(n));
    return true;
  }
  bool Texts(std::vector<std::string>* list) {
    uint64_t n = 0;
    // Each entry takes at least its 8-byte length: a count beyond that is corrupt.
    if (!Number(&n) || n > in_.size() / 8) {
      return false;
    }
    list->resize(static_cast<size_t>(n));
    for (std::string& s : *list) {
      if (!Text(&s)) {
        return false;
      }
    }
    return true;
  }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

}  // namespace

std::string EncodeShimPlan(const ShimPlan& plan) {
  Writer w;
  w.Number(kMagic);
  w.Texts(plan.argv_storage);
  w.Texts(plan.env_storage);
  w.Texts(plan.candidates);
  w.Text(plan.working_dir);
  w.Number(plan.cpu_mask.size());
  for (unsigned long word : plan.cpu_mask) {
    w.Number(word);
  }
  w.Number(plan.cgroup_procs_fd.get() >= 0 ? 1 : 0);
  w.Number(plan.set_ids ? 1 : 0);
  w.Number(plan.check_uid ? 1 : 0);
  w.Number(plan.uid);
  w.Number(plan.gid);
  w.Text(plan.state_file);
  w.Text(plan.cgroup_kill);
  w.Text(plan.cgroup_procs);
  w.Text(plan.hidden_source);
  w.Texts(plan.hidden);
  w.Text(plan.lease_file);
  w.Number(static_cast<uint64_t>(plan.lease_ns));
  w.Number(plan.pty_master_fd.get() >= 0 ? 1 : 0);
  w.Text(plan.pty_secret);
  return w.Take();
}

Status DecodeShimPlan(const std::string& bytes, ShimPlan* plan, bool* has_cgroup_fd,
                      bool* has_pty) {
  Reader r(bytes);
  uint64_t magic = 0, words = 0, cgroup = 0, set_ids = 0, check_uid = 0, uid = 0, gid = 0,
           lease_ns = 0, pty = 0;
  bool ok = r.Number(&magic) && magic == kMagic && r.Texts(&plan->argv_storage) &&
            r.Texts(&plan->env_storage) && r.Texts(&plan->candidates) &&
            r.Text(&plan->working_dir) && r.Number(&words) && words <= bytes.size() / 8;
  if (ok) {
    plan->cpu_mask.resize(static_cast<size_t>(words));
    for (unsigned long& word : plan->cpu_mask) {
      uint64_t v = 0;
      ok = ok && r.Number(&v);
      word = static_cast<unsigned long>(v);
    }
  }
  ok = ok && r.Number(&cgroup) && r.Number(&set_ids) && r.Number(&check_uid) && r.Number(&uid) &&
       r.Number(&gid) && r.Text(&plan->state_file) && r.Text(&plan->cgroup_kill) && r.Text(&plan->cgroup_procs) && r.Text(&plan->hidden_source) &&
       r.Texts(&plan->hidden) && r.Text(&plan->lease_file) && r.Number(&lease_ns) && r.Number(&pty) &&
       r.Text(&plan->pty_secret) && r.done() &&
       !plan->argv_storage.empty() && uid <= UINT32_MAX && gid <= UINT32_MAX;
  if (!ok) {
    return InvalidArgumentError("not a shim plan of this build");
  }
  *has_cgroup_fd = cgroup != 0;
  if (has_pty != nullptr) {
    *has_pty = pty != 0;
  }
  plan->set_ids = set_ids != 0;
  plan->check_uid = check_uid != 0;
  plan->uid = static_cast<uint32_t>(uid);
  plan->gid = static_cast<uint32_t>(gid);
  plan->lease_ns = static_cast<int64_t>(lease_ns);
  plan->argv.clear();
  for (std::string& s : plan->argv_storage) {
    plan->argv.push_back(s.data());
  }
  plan->argv.push_back(nullptr);
  plan->envp.clear();
  for (std::string& s : plan->env_storage) {
    plan->envp.push_back(s.data());
  }
  plan->envp.push_back(nullptr);
  return Status::Ok();
}

}  // namespace tessera
