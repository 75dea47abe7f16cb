#include <cstdio>

int main() {
  std::puts("diffattn: command-line tool under construction");
  return 0;
}
