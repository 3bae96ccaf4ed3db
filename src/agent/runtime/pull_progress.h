// Pull progress: how far a Podman pull of an image has come, for the task's reason while
// it starts ("pulling image R: 1.2 of 4.8 GB").
//
// Podman (containers/image) writes each blob it downloads to a file under TMPDIR before it
// unpacks it into the store, so a pull run with a TMPDIR of its own shows its progress as
// the bytes under that directory; once they reach the image's size (or the files are
// gone) it is unpacking. The size is the manifest's: its layers and config (for a
// manifest list or OCI index, those of the entry for this machine's platform). Layers the
// store already holds are not downloaded again, so such a pull may end before its count
// reaches the size.
// Thread safety: the functions are pure or read the filesystem only; a PullWatch owns its
// thread, and `report` is called on that thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"

namespace tessera {

// What a manifest says of the download: its bytes (layers and config), or for a list the
// digest of the entry whose platform is `os`/`arch` (Go's names: linux, amd64), to be
// fetched next. bytes is -1 when neither is known (a schema 1 manifest, no entry for
// the platform).
struct ManifestSize {
  int64_t bytes = -1;
  std::string child_digest;
};
// InvalidArgument when `json` is not a manifest, a manifest list or an OCI index.
StatusOr<ManifestSize> ReadManifestSize(std::string_view json, std::string_view os,
                                        std::string_view arch);

// This machine's architecture by Go's name (amd64, arm64, ...), as manifests name it.
std::string GoArch();

// The bytes of the regular files at or below `dir` (0 when it is gone).
int64_t BytesUnder(const std::string& dir);

// "pulling image R: 1.2 of 4.8 GB", "... 310 of 420 MB", "... 12 MB so far" (total < 0),
// "... unpacking (4.8 GB)".
std::string PullProgressNote(const std::string& image, int64_t done, int64_t total, bool unpacking);

// While it lives, a thread that every `period` reports the progress of the pull
// downloading into `tmpdir` through `report` (only when the note changed); after the
// first period it asks `total` for the image's size once (it may block: the registry is
// asked; -1: not known), so that a pull over within a period asks nothing more.
class PullWatch {
 public:
  PullWatch(std::string image, std::string tmpdir, std::function<int64_t()> total,
            std::function<void(const std::string& note)> report, std::chrono::milliseconds period);
  ~PullWatch();  // stops the thread and waits for it
  PullWatch(const PullWatch&) = delete;
  PullWatch& operator=(const PullWatch&) = delete;

 private:
  void Run(const std::function<int64_t()>& total);

  const std::string image_;
  const std::string tmpdir_;
  const std::function<void(const std::string&)> report_;
  const std::chrono::milliseconds period_;
  Mutex mu_;
  CondVar wake_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace tessera
