// Linked with one whole layer library and only the layers it declares: if any
// object of the layer calls into an undeclared layer, this fails to link.
int main() { return 0; }
