#include "policy/network_parts.h"

#include <map>
#include <mutex>

namespace rl {
namespace {

template <typename Part>
struct Registry {
  std::mutex mu;
  std::map<std::string, std::function<std::unique_ptr<Part>()>> makers;

  bool Add(std::string name, std::function<std::unique_ptr<Part>()> make) {
    std::lock_guard<std::mutex> lock(mu);
    makers[std::move(name)] = std::move(make);
    return true;
  }
  std::unique_ptr<Part> Make(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = makers.find(name);
    return it == makers.end() ? nullptr : it->second();
  }
  std::vector<std::string> Names() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> names;
    for (const auto& [name, make] : makers) names.push_back(name);
    return names;
  }
};

Registry<ImageEncoder>& Encoders() {
  static auto* registry = new Registry<ImageEncoder>();
  return *registry;
}

Registry<RecurrentCore>& Cores() {
  static auto* registry = new Registry<RecurrentCore>();
  return *registry;
}

}  // namespace

bool RegisterImageEncoder(std::string name,
                          std::function<std::unique_ptr<ImageEncoder>()> make) {
  return Encoders().Add(std::move(name), std::move(make));
}

bool RegisterRecurrentCore(
    std::string name, std::function<std::unique_ptr<RecurrentCore>()> make) {
  return Cores().Add(std::move(name), std::move(make));
}

std::unique_ptr<ImageEncoder> MakeImageEncoder(const std::string& name) {
  return Encoders().Make(name);
}

std::unique_ptr<RecurrentCore> MakeRecurrentCore(const std::string& name) {
  return Cores().Make(name);
}

std::vector<std::string> ImageEncoderNames() { return Encoders().Names(); }

std::vector<std::string> RecurrentCoreNames() { return Cores().Names(); }

}  // namespace rl
