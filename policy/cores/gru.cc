// The GRU core (PyTorch's GRUCell: gates r, z, n), as CleanRL's recurrent
// PPO initialises cells: orthogonal weights, zero biases. Its state per
// env is the hidden state: size numbers.
#include <torch/nn/init.h>
#include <torch/nn/modules/rnn.h>

#include "absl/strings/str_cat.h"
#include "policy/network_parts.h"

namespace rl {
namespace {

class GruCore : public RecurrentCore {
 public:
  std::string name() const override { return "gru"; }
  int64_t StateSize(int64_t size) const override { return size; }

  void Register(torch::nn::Module& policy, int64_t in, int64_t size) override {
    size_ = size;
    cell_ = policy.register_module("gru", torch::nn::GRUCell(in, size));
    torch::NoGradGuard no_grad;
    for (auto& w : {cell_->weight_ih, cell_->weight_hh}) {
      torch::nn::init::orthogonal_(w, 1.0);
    }
    for (auto& b : {cell_->bias_ih, cell_->bias_hh}) torch::nn::init::zeros_(b);
  }

  torch::Tensor Input(const torch::Tensor& features) override {
    return torch::linear(features, cell_->weight_ih, cell_->bias_ih);
  }

  // n = tanh(W_in x + b_in + r * (W_hn h + b_hn)); h' = (1 - z) n + z h.
  torch::Tensor Step(const torch::Tensor& xw, const torch::Tensor& state,
                     torch::Tensor* next_state) override {
    const std::vector<torch::Tensor> x = xw.chunk(3, 1);
    const std::vector<torch::Tensor> hw =
        torch::addmm(cell_->bias_hh, state, cell_->weight_hh.t()).chunk(3, 1);
    const torch::Tensor r = (x[0] + hw[0]).sigmoid();
    const torch::Tensor z = (x[1] + hw[1]).sigmoid();
    const torch::Tensor n = (x[2] + r * hw[2]).tanh();
    *next_state = n + z * (state - n);
    return *next_state;
  }

  void Script(ScriptWriter& s, const std::string& x,
              const std::string& state) const override {
    s.Line(absl::StrCat(x, " = torch.gru_cell(", x, ", ", state, ", ",
                        s.Ref("gru.weight_ih"), ", ", s.Ref("gru.weight_hh"),
                        ", ", s.Ref("gru.bias_ih"), ", ", s.Ref("gru.bias_hh"),
                        ")"));
    s.Line("next_state = " + x);
  }

  std::string Onnx(OnnxWriter& g, const std::string& x,
                   const std::string& state,
                   std::string* next_state) const override {
    auto split = [&](const std::string& t) {
      return g.Nodes(
          "Split", {t, g.Ints(std::vector<int64_t>(3, size_))}, 3,
          [](onnx::NodeProto* n) { OnnxWriter::IntAttr(n, "axis", 1); });
    };
    const std::vector<std::string> gi =
        split(g.Gemm(x, "gru.weight_ih", "gru.bias_ih"));
    const std::vector<std::string> gh =
        split(g.Gemm(state, "gru.weight_hh", "gru.bias_hh"));
    const std::string r = g.Node("Sigmoid", {g.Node("Add", {gi[0], gh[0]})});
    const std::string z = g.Node("Sigmoid", {g.Node("Add", {gi[1], gh[1]})});
    const std::string n =
        g.Node("Tanh", {g.Node("Add", {gi[2], g.Node("Mul", {r, gh[2]})})});
    const std::string h2 =
        g.Node("Add", {g.Node("Mul", {g.Node("Sub", {g.Scalar(1), z}), n}),
                       g.Node("Mul", {z, state})});
    *next_state = h2;
    return h2;
  }

 private:
  int64_t size_ = 0;
  torch::nn::GRUCell cell_{nullptr};
};

REGISTER_RECURRENT_CORE("gru", GruCore);

}  // namespace
}  // namespace rl
