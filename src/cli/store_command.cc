#include "cli/store_command.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "cli/ha_server_command.h"
#include "store/store_migrate.h"
#include "store/store_url.h"

namespace tessera {
namespace {

struct MigrateFlags {
  std::string from, to;
  EtcdFlags etcd;
  int64_t batch = 100;
};

int Fail(const Status& s) {
  std::cerr << "tessera store migrate: " << s.message() << "\n";
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

int RunMigrate(const MigrateFlags& f) {
  StatusOr<StoreUrl> from = ParseStoreUrl(f.from);
  if (!from.ok() || from->kind != StoreUrl::Kind::kSqlite) {
    return Fail(InvalidArgumentError("--from: expected a SQLite state.db (PATH or sqlite:PATH), got '" +
                                     f.from + "'"));
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(from->path, ec)) {
    return Fail(InvalidArgumentError("--from: no such file: " + from->path));
  }
  StatusOr<OpenStoreOptions> to_options = ToEtcdOpenStoreOptions(f.to, f.etcd, "--to");
  if (!to_options.ok()) {
    return Fail(to_options.status());
  }
  StatusOr<std::unique_ptr<Store>> source = OpenStore(f.from);
  if (!source.ok()) {
    return Fail(source.status());
  }
  StatusOr<std::unique_ptr<Store>> dest = OpenStore(f.to, std::move(to_options).value());
  if (!dest.ok()) {
    return Fail(dest.status());
  }
  MigrateOptions options;
  options.batch_rows = static_cast<size_t>(f.batch);
  options.progress = [](const MigrateCounts& c) {
    std::cerr << "\rtessera store migrate: " << c.tokens << " tokens, " << c.kv << " kv rows, "
              << c.jobs << " jobs, " << c.usage << " usage rows" << std::flush;
  };
  StatusOr<MigrateCounts> counts = MigrateStore(**source, **dest, options);
  std::cerr << "\n";
  (void)(*dest)->Close();
  (void)(*source)->Close();
  if (!counts.ok()) {
    return Fail(counts.status());
  }
  std::cout << "migrated " << counts->jobs << " jobs, " << counts->usage << " usage rows, "
            << counts->tokens << " tokens and " << counts->kv << " kv rows from " << from->path
            << " to " << f.to << " (read back and compared)\n"
            << "next: copy the old data directory's *.token files to the controllers and start "
               "them with --store "
            << f.to << "\n";
  return 0;
}

}  // namespace

void AddStoreCommand(CLI::App& app, int* exit_code) {
  CLI::App* store = app.add_subcommand("store", "The controller's state store");
  store->require_subcommand(1);
  auto flags = std::make_shared<MigrateFlags>();
  CLI::App* migrate = store->add_subcommand(
      "migrate", "Copy a stopped controller's SQLite store into an empty etcd prefix");
  migrate->add_option("--from", flags->from, "The SQLite store (DATA/state.db)")->required();
  migrate->add_option("--to", flags->to, "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]")->required();
  migrate->add_option("--batch", flags->batch, "Rows per etcd transaction")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000}))
      ->capture_default_str();
  AddEtcdFlags(migrate, &flags->etcd, "");
  migrate->callback([flags, exit_code] { *exit_code = RunMigrate(*flags); });
}

}  // namespace tessera
