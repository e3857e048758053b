// An empty block defines nothing.
tapir::model! {}

fn main() {}
