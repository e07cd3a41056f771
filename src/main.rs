fn main() {
    std::process::exit(upgrade::run(std::env::args_os()));
}
