use tapir::prelude::*;
fn main() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).requires_grad_(true);
    let b = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]);
    let y = (&a * &b).relu().sum_dim(1, false);
    println!("{y}");
    y.sum().backward();
    println!("{}", a.grad().unwrap());
    let m = a.matmul(&a.t());
    println!("{m}");
    println!("{}", a.softmax(-1));
    let x = Tensor::randn(&[2, 3, 8, 8]);
    let w = Tensor::randn(&[4, 3, 3, 3]);
    println!(
        "{:?}",
        x.conv2d(&w, None, Conv2dOptions::default().padding(1))
            .max_pool2d((2, 2), (2, 2), (0, 0), (1, 1))
    );
}
