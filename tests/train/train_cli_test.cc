// `rlx train` end to end: a tiny classifier saved as a model dir, generated
// data, two epochs, checkpoint + --resume equal to an uninterrupted run, the
// output dir runnable by `rlx run`, the curves SVG, and the errors.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/testing.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  fs::path dir, model, data, eval;
};

// A model dir whose batch dim is symbolic (so the last partial batch runs),
// or static when `static_batch` > 0.
Fixture make_fixture(const std::string& name, bool with_loss = true, int64_t static_batch = 0) {
  Fixture f;
  f.dir = testing::process_temp_dir(name);
  Graph g;
  Builder b(g);
  const Dim n = static_batch > 0 ? Dim(static_batch) : Dim::symbol("batch");
  const NodeId x = b.input("x", Shape({n, Dim(4)}, DType::F32));
  const NodeId target = b.input("target", Shape({n}, DType::I64));
  const NodeId w1 = b.param("fc1.weight", Shape(Dims{8, 4}, DType::F32));
  const NodeId w2 = b.param("fc2.weight", Shape(Dims{3, 8}, DType::F32));
  const NodeId logits = b.linear(b.relu(b.linear(x, w1)), w2);
  if (with_loss) g.add_output("loss", b.op(Op::SoftmaxCrossEntropy, {logits, target}));
  g.add_output("logits", logits);
  TensorMap w{{"fc1.weight", testing::random_tensor({8, 4}, DType::F32, 1)},
              {"fc2.weight", testing::random_tensor({3, 8}, DType::F32, 2)}};
  f.model = f.dir / "model";
  save_model(f.model.string(), g, w);
  // Labels a linear rule of x can learn: the argmax of x's first three features.
  auto data = [&](int64_t count, uint64_t seed) {
    Tensor x = testing::random_tensor({count, 4}, DType::F32, seed);
    std::vector<int64_t> t;
    for (int64_t i = 0; i < count; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < 3; ++j)
        if (x.item_as_double(i * 4 + j) > x.item_as_double(i * 4 + best)) best = j;
      t.push_back(best);
    }
    return TensorMap{{"x", x}, {"target", Tensor::from_vector<int64_t>({count}, t, DType::I64)}};
  };
  f.data = f.dir / "train.safetensors";
  f.eval = f.dir / "eval.safetensors";
  write_safetensors(f.data.string(), data(20, 5));
  write_safetensors(f.eval.string(), data(12, 6));
  return f;
}

std::string train_args(const Fixture& f, const fs::path& out, int epochs, int batch = 8) {
  return "train " + f.model.string() + " --data " + f.data.string() + " --eval " + f.eval.string() +
         " --optimizer adam --lr 0.05 --schedule cosine --warmup 2 --batch " +
         std::to_string(batch) + " --clip-norm 5 --seed 3 -t 1 --epochs " + std::to_string(epochs) +
         " --out " + out.string();
}

TEST(TrainCli, TrainsResumesExactlyAndRuns) {
  const Fixture f = make_fixture("train_cli");
  const fs::path full = f.dir / "full", split = f.dir / "split";
  const testing::CliResult a = testing::run_cli(train_args(f, full, 2));
  ASSERT_EQ(a.status, 0) << a.output;
  EXPECT_NE(a.output.find("epoch 2/2"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("eval acc"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("final eval loss"), std::string::npos) << a.output;

  const testing::CliResult b1 = testing::run_cli(train_args(f, split, 1));
  ASSERT_EQ(b1.status, 0) << b1.output;
  const testing::CliResult b2 =
      testing::run_cli(train_args(f, split, 2) + " --resume " + split.string());
  ASSERT_EQ(b2.status, 0) << b2.output;
  EXPECT_NE(b2.output.find("resuming"), std::string::npos) << b2.output;
  const testing::CliResult other = testing::run_cli(
      "train " + f.model.string() + " --data " + f.data.string() + " --optimizer sgd --epochs 3" +
      " --out " + (f.dir / "other").string() + " --resume " + split.string());
  EXPECT_EQ(other.status, 1) << other.output;
  EXPECT_NE(other.output.find("trained with adam, not sgd"), std::string::npos) << other.output;

  const TensorMap wa = read_safetensors((full / "weights.safetensors").string());
  const TensorMap wb = read_safetensors((split / "weights.safetensors").string());
  for (const auto& [name, t] : wa) EXPECT_TRUE(testing::all_equal(wb.at(name), t)) << name;
  const TensorMap ca = read_safetensors((full / "checkpoint.safetensors").string());
  const TensorMap cb = read_safetensors((split / "checkpoint.safetensors").string());
  EXPECT_EQ(ca.at("optim::step").item_as_double(0), 6);  // 3 batches (8, 8, 4) x 2 epochs
  EXPECT_TRUE(testing::all_equal(cb.at("optim::exp_avg_sq::fc1.weight"),
                                 ca.at("optim::exp_avg_sq::fc1.weight")));
  EXPECT_TRUE(
      testing::all_equal(cb.at("train::history::eval_loss"), ca.at("train::history::eval_loss")));

  std::ifstream svg(full / "curves.svg");
  std::stringstream text;
  text << svg.rdbuf();
  EXPECT_NE(text.str().find("<svg"), std::string::npos);
  EXPECT_NE(text.str().find("eval_accuracy"), std::string::npos);

  const testing::CliResult run =
      testing::run_cli("run " + full.string() + " --inputs " + f.eval.string());
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("logits"), std::string::npos) << run.output;
}

TEST(TrainCli, StaticBatchDropsThePartialBatch) {
  const Fixture f = make_fixture("train_cli_static", true, 8);
  const fs::path out = f.dir / "out";
  const testing::CliResult r = testing::run_cli(train_args(f, out, 2));
  ASSERT_EQ(r.status, 0) << r.output;
  // 20 samples: two full batches of 8 per epoch, the last 4 dropped.
  const TensorMap c = read_safetensors((out / "checkpoint.safetensors").string());
  EXPECT_EQ(c.at("optim::step").item_as_double(0), 4);
  const testing::CliResult bad = testing::run_cli(train_args(f, out, 1, 4));
  EXPECT_EQ(bad.status, 1) << bad.output;
  EXPECT_NE(bad.output.find("static batch dim 8; pass --batch 8"), std::string::npos) << bad.output;
}

// `mpirun -np 2 rlx train` with the one-process run's arguments: two
// processes each take half of every batch (the last one of 4 too) and
// average their gradients, so they must end where one process does on the
// same global batches, up to float summation order.
TEST(TrainCli, DataParallelOverMpiEqualsOneProcess) {
  if (std::string(RLX_MPIEXEC).empty()) GTEST_SKIP() << "rlx was built without MPI";
  const Fixture f = make_fixture("train_cli_mpi");
  const fs::path one = f.dir / "one", two = f.dir / "two";
  const testing::CliResult a = testing::run_cli(train_args(f, one, 3));
  ASSERT_EQ(a.status, 0) << a.output;
  // Open MPI refuses root and counts slots by cores unless told otherwise,
  // and its shared-memory single-copy mode needs ptrace rights a container
  // may not grant; other MPIs ignore these variables.
  const std::string mpirun =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none " +
      std::string(RLX_MPIEXEC) + " -n 2 " + RLX_CLI_PATH + " ";
  const testing::CliResult b = testing::run_command(mpirun + train_args(f, two, 3));
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_NE(b.output.find("data-parallel over 2 processes"), std::string::npos) << b.output;
  // Only rank 0 reports.
  EXPECT_EQ(b.output.find("epoch 3/3"), b.output.rfind("epoch 3/3")) << b.output;

  const TensorMap ca = read_safetensors((one / "checkpoint.safetensors").string());
  const TensorMap cb = read_safetensors((two / "checkpoint.safetensors").string());
  EXPECT_EQ(cb.at("optim::step").item_as_double(0), 9);  // batches of 8, 8, 4 x 3 epochs
  for (const auto& [name, t] : ca) {
    const testing::Parity p = testing::parity(cb.at(name), t);
    EXPECT_LE(p.max_abs, 1e-5 * std::max(1.0, p.max_ref)) << name;
  }
  const TensorMap wb = read_safetensors((two / "weights.safetensors").string());
  EXPECT_EQ(wb.size(), 2u);

  // Fewer samples in a batch than processes: an error from every process,
  // and mpirun fails.
  const testing::CliResult small = testing::run_command(mpirun + train_args(f, two, 1, 1));
  EXPECT_NE(small.status, 0) << small.output;
  EXPECT_NE(small.output.find("--batch 1 is smaller than the 2 processes"), std::string::npos)
      << small.output;
}

TEST(TrainCli, CompilesATrainingStepForCoreMLThatTrains) {
  // rlx compile --train: the package and its initial state; then calls of
  // `rlx coreml-run`, each fed the previous call's next__ outputs, lower the loss.
  const Fixture f = make_fixture("compile_train");
  const fs::path pkg = f.dir / "step.mlpackage", state = f.dir / "step.state.safetensors";
  const testing::CliResult c = testing::run_cli(
      "compile " + f.model.string() + " --target coreml --train --optimizer sgd --momentum 0.9 " +
      "--clip-norm 5 --input-shape x=20,4 --input-shape target=20 -o " + pkg.string());
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_NE(c.output.find("one sgd step per call"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("feed each output next__S back as input S"), std::string::npos);
  TensorMap feed = read_safetensors(state.string());
  ASSERT_EQ(feed.size(), 4u);  // two params, two momentum buffers
  EXPECT_TRUE(feed.count("param__fc1_weight") && feed.count("momentum_buffer__fc2_weight"));
  for (auto& [name, t] : read_safetensors(f.data.string())) feed[name] = t;
  std::vector<double> losses;
  for (int step = 1; step <= 4; ++step) {
    feed["lr"] = Tensor::from_vector<float>({}, {0.1f}, DType::F32);
    feed["optim_step"] = Tensor::from_vector<float>({}, {float(step)}, DType::F32);
    const fs::path in = f.dir / "in.safetensors", out = f.dir / "out.safetensors";
    write_safetensors(in.string(), feed);
    const testing::CliResult r = testing::run_cli("coreml-run " + pkg.string() + " --inputs " +
                                                  in.string() + " --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.output;
    const TensorMap o = read_safetensors(out.string());
    losses.push_back(o.at("loss").item_as_double(0));
    for (const auto& [name, t] : o)
      if (name.rfind("next__", 0) == 0) feed[name.substr(6)] = t;
  }
  EXPECT_LT(losses.back(), losses.front());

  const testing::CliResult sym = testing::run_cli("compile " + f.model.string() +
                                                  " --target coreml --train -o " + pkg.string());
  EXPECT_EQ(sym.status, 1);
  EXPECT_NE(sym.output.find("--input-shape"), std::string::npos) << sym.output;
  const testing::CliResult bad = testing::run_cli(
      "compile " + f.model.string() + " --train --input-shape x=2,oops -o " + pkg.string());
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("'oops' is not a dimension"), std::string::npos) << bad.output;
}

TEST(TrainCli, ClearErrors) {
  const Fixture f = make_fixture("train_cli_err");
  const fs::path out = f.dir / "out";
  auto fails_with = [&](const std::string& args, const std::string& want) {
    const testing::CliResult r = testing::run_cli(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(want), std::string::npos) << args << "\n" << r.output;
  };
  fails_with("train " + f.model.string() + " --data " + f.data.string() + " --optimizer adagrad" +
                 " --out " + out.string(),
             "unknown optimizer 'adagrad'");
  write_safetensors((f.dir / "no_target.safetensors").string(),
                    {{"x", Tensor({4, 4}, DType::F32)}});
  fails_with("train " + f.model.string() + " --data " + (f.dir / "no_target.safetensors").string() +
                 " --out " + out.string(),
             "no tensor for the model's input 'target'");
  write_safetensors((f.dir / "ragged.safetensors").string(),
                    {{"x", Tensor({4, 4}, DType::F32)}, {"target", Tensor({5}, DType::I64)}});
  fails_with("train " + f.model.string() + " --data " + (f.dir / "ragged.safetensors").string() +
                 " --out " + out.string(),
             "leading dims must agree");
  const Fixture nl = make_fixture("train_cli_noloss", false);
  fails_with(
      "train " + nl.model.string() + " --data " + nl.data.string() + " --out " + out.string(),
      "no output named 'loss'");
  const testing::CliResult help = testing::run_cli("train --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("--clip-norm"), std::string::npos);
}

}  // namespace
}  // namespace rlx
