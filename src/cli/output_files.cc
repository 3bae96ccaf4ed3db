#include "cli/output_files.h"

#include <fstream>

namespace tessera {

Status WriteTextFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) {
    return UnavailableError("cannot write '" + path.string() + "'");
  }
  return Status::Ok();
}

}  // namespace tessera
