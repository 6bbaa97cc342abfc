// Loads an SDF or URDF file with the reference SDFormat parser (libsdformat, Debian's
// libsdformat-dev) and prints the model's joints: type, spring stiffness, damping, mimic leader.
// Exit code 1 with the parser's errors on stderr. Built by test/test_export.py.
#include <iostream>
#include <sdf/sdf.hh>

int main(int argc, char **argv) {
  if (argc != 2) { std::cerr << "usage: sdformat_check FILE" << std::endl; return 2; }
  sdf::Root root;
  sdf::Errors errors = root.Load(argv[1]);
  for (const auto &e : errors) std::cerr << e.Message() << std::endl;
  if (!errors.empty()) return 1;
  const sdf::Model *model = root.Model();
  if (model == nullptr && root.WorldCount() > 0) {
    std::cout << "world " << root.WorldByIndex(0)->Name() << std::endl;
    return 0;
  }
  if (model == nullptr) { std::cerr << "no model" << std::endl; return 1; }
  std::cout << "model " << model->Name() << " links " << model->LinkCount() << std::endl;
  for (uint64_t i = 0; i < model->JointCount(); ++i) {
    const sdf::Joint *joint = model->JointByIndex(i);
    std::cout << "joint " << joint->Name() << " " << static_cast<int>(joint->Type());
    if (joint->Axis(0) != nullptr)
      std::cout << " " << joint->Axis(0)->SpringStiffness() << " " << joint->Axis(0)->Damping();
    std::cout << std::endl;
  }
  return 0;
}
