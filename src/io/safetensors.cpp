#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tessera {

using nlohmann::json;

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const std::string where = path.string();
  int fd = ::open(where.c_str(), O_RDONLY);
  TESSERA_CHECK(fd >= 0, "cannot open " + where + ": " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("cannot stat " + where);
  }
  size_t size = size_t(st.st_size);
  if (size < 8) {
    ::close(fd);
    throw Error(where + ": not a safetensors file (only " + std::to_string(size) + " bytes)");
  }
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  TESSERA_CHECK(p != MAP_FAILED, "cannot mmap " + where + ": " + std::strerror(errno));
  mapping_ = std::shared_ptr<void>(p, [size](void* q) { munmap(q, size); });
  const char* base = static_cast<const char*>(p);

  uint64_t header_len;
  std::memcpy(&header_len, base, 8);
  TESSERA_CHECK(header_len <= size - 8, where + ": header length " + std::to_string(header_len) +
                                            " exceeds file size " + std::to_string(size) + " (truncated file?)");
  json header;
  try {
    header = json::parse(base + 8, base + 8 + header_len);
  } catch (const json::exception& e) {
    throw Error(where + ": malformed safetensors header: " + e.what());
  }
  TESSERA_CHECK(header.is_object(), where + ": safetensors header is not a JSON object");
  data_ = base + 8 + header_len;
  size_t data_size = size - 8 - header_len;

  std::vector<std::pair<size_t, size_t>> ranges;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (info.is_object())
        for (auto& [k, v] : info.items())
          if (v.is_string()) metadata_[k] = v.get<std::string>();
      continue;
    }
    try {
      Entry e;
      e.dtype = dtype_from_safetensors(info.at("dtype").get<std::string>());
      e.shape = info.at("shape").get<Shape>();
      auto offs = info.at("data_offsets").get<std::vector<size_t>>();
      TESSERA_CHECK(offs.size() == 2 && offs[0] <= offs[1], "bad data_offsets");
      for (int64_t d : e.shape) TESSERA_CHECK(d >= 0, "negative dimension");
      e.begin = offs[0];
      e.end = offs[1];
      TESSERA_CHECK(e.end - e.begin == size_t(shape_numel(e.shape)) * dtype_size(e.dtype),
                    "data size " + std::to_string(e.end - e.begin) + " does not match shape " +
                        shape_str(e.shape) + " of " + std::string(dtype_name(e.dtype)));
      TESSERA_CHECK(e.end <= data_size, "data ends at byte " + std::to_string(e.end) + " but the file holds " +
                                            std::to_string(data_size) + " (truncated file?)");
      tensors_[name] = e;
      ranges.emplace_back(e.begin, e.end);
    } catch (const Error& err) {
      throw Error(where + ": tensor \"" + name + "\": " + err.what());
    } catch (const json::exception& err) {
      throw Error(where + ": tensor \"" + name + "\": malformed entry: " + err.what());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    TESSERA_CHECK(ranges[i].first >= ranges[i - 1].second, where + ": tensors overlap in the data section");
}

Tensor SafetensorsFile::get(const std::string& name) const {
  auto it = tensors_.find(name);
  TESSERA_CHECK(it != tensors_.end(), path_.string() + ": no tensor \"" + name + "\"");
  const Entry& e = it->second;
  return Tensor::view(const_cast<char*>(data_ + e.begin), e.dtype, e.shape, mapping_);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (auto& [k, v] : tensors_) out.push_back(k);
  return out;
}

WeightStore::WeightStore(const std::filesystem::path& dir) {
  auto single = dir / "model.safetensors";
  auto index = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(index)) {
    json j;
    try {
      std::ifstream in(index);
      j = json::parse(in);
    } catch (const json::exception& e) {
      throw Error(index.string() + ": malformed JSON: " + e.what());
    }
    TESSERA_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), index.string() + ": no \"weight_map\"");
    std::map<std::string, const SafetensorsFile*> by_file;
    for (auto& [name, file] : j["weight_map"].items()) {
      TESSERA_CHECK(file.is_string(), index.string() + ": weight_map entry for " + name + " is not a file name");
      auto fname = file.get<std::string>();
      if (!by_file.count(fname)) {
        files_.push_back(std::make_unique<SafetensorsFile>(dir / fname));
        by_file[fname] = files_.back().get();
      }
      TESSERA_CHECK(by_file[fname]->has(name),
                    index.string() + ": tensor \"" + name + "\" is not in its shard " + fname);
      where_[name] = by_file[fname];
    }
  } else if (std::filesystem::exists(single)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single));
    for (auto& n : files_.back()->names()) where_[n] = files_.back().get();
  } else {
    throw Error(dir.string() + ": no model.safetensors or model.safetensors.index.json");
  }
}

Tensor WeightStore::stored(const std::string& name) const {
  auto it = where_.find(name);
  TESSERA_CHECK(it != where_.end(), "missing tensor \"" + name + "\" in the checkpoint");
  return it->second->get(name);
}

namespace {

// "L" for a name "L.weight", else the name.
std::string layer_of(const std::string& name) {
  return name.size() > 7 && name.ends_with(".weight") ? name.substr(0, name.size() - 7) : name;
}

}  // namespace

std::optional<std::string> WeightStore::quantized_layer(const std::string& name) const {
  std::string layer = layer_of(name);
  if (layer == name || !has(layer + ".scales")) return std::nullopt;
  return layer;
}

Tensor WeightStore::get(const std::string& name) const {
  Tensor t = stored(name);
  const std::optional<std::string> quantized = quantized_layer(name);
  if (!quantized) {
    const std::string layer = layer_of(name);
    TESSERA_CHECK(t.dtype() != DType::U32,
                  "tensor \"" + name + "\" holds quantized codes (U32) but \"" + layer +
                      ".scales\" is missing, or config.json has no \"quantization\"");
    return t;
  }
  const std::string& layer = *quantized;
  std::optional<MlxQuantization::Params> p = quant_ ? quant_->of(layer) : std::nullopt;
  TESSERA_CHECK(p.has_value(), "layer \"" + layer +
                                   "\" is stored quantized, but config.json's \"quantization\" " +
                                   (quant_ ? "leaves it unquantized" : "is missing"));
  Tensor q = mlx_quantized(t, stored(layer + ".scales"), stored(layer + ".biases"), *p, layer);
  return keep_quantized_ ? q : dequantized(q);
}

Tensor WeightStore::get(const std::string& name, const Shape& expected) const {
  Tensor t = get(name);
  TESSERA_CHECK(t.shape() == expected, "tensor \"" + name + "\" has shape " + shape_str(t.shape()) +
                                           ", expected " + shape_str(expected));
  return t;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  for (auto& [k, v] : where_) out.push_back(k);
  return out;
}

size_t WeightStore::total_bytes() const {
  size_t n = 0;
  for (auto& [k, f] : where_) n += f->get(k).nbytes();
  return n;
}

size_t WeightStore::widened_bytes() const {
  // Layer L's quantization where "L.weight" is stored beside "L.scales" and config.json quantizes
  // L: its weight then widens, with its scales and biases inside it.
  auto widens = [&](const std::string& layer) -> std::optional<MlxQuantization::Params> {
    if (!quant_ || !has(layer + ".weight") || !has(layer + ".scales")) return std::nullopt;
    return quant_->of(layer);
  };
  size_t n = 0;
  for (auto& [name, f] : where_) {
    const std::string layer = layer_of(name);
    if (layer != name) {
      if (std::optional<MlxQuantization::Params> p = widens(layer)) {
        const Tensor scales = stored(layer + ".scales");
        n += size_t(mlx_quantized(f->get(name), scales, stored(layer + ".biases"), *p, layer).numel()) *
             dtype_size(scales.dtype());
        continue;
      }
    } else if ((name.ends_with(".scales") || name.ends_with(".biases")) &&
               widens(name.substr(0, name.size() - 7))) {
      continue;
    }
    n += f->get(name).nbytes();
  }
  return n;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (auto& [name, t] : tensors) {
    header[name] = {{"dtype", std::string(dtype_name(t.dtype()))},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // align the data section
  std::ofstream out(path, std::ios::binary);
  TESSERA_CHECK(out, "cannot write " + path.string());
  uint64_t len = h.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(h.data(), std::streamsize(h.size()));
  for (auto& [name, t] : tensors) out.write(static_cast<const char*>(t.raw()), std::streamsize(t.nbytes()));
  TESSERA_CHECK(out.good(), "error writing " + path.string());
}

}  // namespace tessera
