// job_spec_keys: the keys the job codec accepts, one a line ("job resources.gpus",
// "batch jobs"), for checks of clients in other languages
// (scripts/check-python-job-keys.py) against the codec's own lists.
#include <iostream>
#include <string>

#include "api/job_keys.h"

int main() {
  for (const std::string& path : tessera::job_keys::JobSpecKeyPaths()) {
    std::cout << "job " << path << "\n";
  }
  for (std::string_view key : tessera::job_keys::kBatchKeys) {
    std::cout << "batch " << key << "\n";
  }
  return 0;
}
