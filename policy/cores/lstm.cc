// The LSTM core (PyTorch's LSTMCell: gates i, f, g, o), as CleanRL's
// recurrent PPO: orthogonal weights, zero biases. Its state per env is the
// hidden state, then the cell state: 2 x size numbers.
#include <torch/nn/init.h>
#include <torch/nn/modules/rnn.h>

#include "absl/strings/str_cat.h"
#include "policy/network_parts.h"

namespace rl {
namespace {

class LstmCore : public RecurrentCore {
 public:
  std::string name() const override { return "lstm"; }
  int64_t StateSize(int64_t size) const override { return 2 * size; }

  void Register(torch::nn::Module& policy, int64_t in, int64_t size) override {
    size_ = size;
    cell_ = policy.register_module("lstm", torch::nn::LSTMCell(in, size));
    torch::NoGradGuard no_grad;
    for (auto& w : {cell_->weight_ih, cell_->weight_hh}) {
      torch::nn::init::orthogonal_(w, 1.0);
    }
    for (auto& b : {cell_->bias_ih, cell_->bias_hh}) torch::nn::init::zeros_(b);
  }

  torch::Tensor Input(const torch::Tensor& features) override {
    return torch::linear(features, cell_->weight_ih,
                         cell_->bias_ih + cell_->bias_hh);
  }

  torch::Tensor Step(const torch::Tensor& xw, const torch::Tensor& state,
                     torch::Tensor* next_state) override {
    const torch::Tensor h = state.narrow(1, 0, size_);
    const torch::Tensor c = state.narrow(1, size_, size_);
    const std::vector<torch::Tensor> g =
        torch::addmm(xw, h, cell_->weight_hh.t()).chunk(4, 1);
    const torch::Tensor c2 = g[1].sigmoid() * c + g[0].sigmoid() * g[2].tanh();
    const torch::Tensor h2 = g[3].sigmoid() * c2.tanh();
    *next_state = torch::cat({h2, c2}, 1);
    return h2;
  }

  void Script(ScriptWriter& s, const std::string& x,
              const std::string& state) const override {
    s.Line(absl::StrCat("h, cell = torch.lstm_cell(", x, ", [", state,
                        "[:, :", size_, "], ", state, "[:, ", size_, ":]], ",
                        s.Ref("lstm.weight_ih"), ", ", s.Ref("lstm.weight_hh"),
                        ", ", s.Ref("lstm.bias_ih"), ", ",
                        s.Ref("lstm.bias_hh"), ")"));
    s.Line("next_state = torch.cat([h, cell], 1)");
    s.Line(x + " = h");
  }

  std::string Onnx(OnnxWriter& g, const std::string& x,
                   const std::string& state,
                   std::string* next_state) const override {
    const std::string hidden = g.Columns(state, 0, size_);
    const std::string cell = g.Columns(state, size_, 2 * size_);
    const std::string gates =
        g.Node("Add", {g.Gemm(x, "lstm.weight_ih", "lstm.bias_ih"),
                       g.Gemm(hidden, "lstm.weight_hh", "lstm.bias_hh")});
    const std::vector<std::string> q =
        g.Nodes("Split", {gates, g.Ints(std::vector<int64_t>(4, size_))}, 4,
                [](onnx::NodeProto* n) { OnnxWriter::IntAttr(n, "axis", 1); });
    const std::string i = g.Node("Sigmoid", {q[0]});
    const std::string f = g.Node("Sigmoid", {q[1]});
    const std::string gg = g.Node("Tanh", {q[2]});
    const std::string o = g.Node("Sigmoid", {q[3]});
    const std::string c2 =
        g.Node("Add", {g.Node("Mul", {f, cell}), g.Node("Mul", {i, gg})});
    const std::string h2 = g.Node("Mul", {o, g.Node("Tanh", {c2})});
    *next_state = g.Node("Concat", {h2, c2}, [](onnx::NodeProto* n) {
      OnnxWriter::IntAttr(n, "axis", 1);
    });
    return h2;
  }

 private:
  int64_t size_ = 0;
  torch::nn::LSTMCell cell_{nullptr};
};

REGISTER_RECURRENT_CORE("lstm", LstmCore);

}  // namespace
}  // namespace rl
