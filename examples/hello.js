// The smallest program: runs unchanged under `interpreter run` and under node.
console.log("Hello from code mode!");
