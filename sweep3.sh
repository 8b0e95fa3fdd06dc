cases="["
for tuned in False True; do
for opt in "dict(act='relu')" "dict(act='tanh')" "dict(act='silu')" "dict(act='none')" "dict(affine=False)" "dict(norm='rms')" "dict(norm='rms',act='relu')" "dict(autocast=True)" "dict(autocast=True,act='relu')" "dict(loss='mean')"; do
for sd in "(1000,),32" "(2,7),100" "(1,),5"; do
for dt in torch.float32 torch.bfloat16; do
cases="$cases($sd,16,$dt,True,$tuned,$opt),"
done; done; done; done
cases="$cases]"
/work/main/.venv/bin/python train2.py "$cases"
