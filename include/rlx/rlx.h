// The rlx public API in one include.
#pragma once
#include "rlx/attrs.h"
#include "rlx/builder.h"
#include "rlx/dtype.h"
#include "rlx/error.h"
#include "rlx/graph.h"
#include "rlx/io.h"
#include "rlx/model.h"
#include "rlx/runtime.h"
#include "rlx/shape.h"
#include "rlx/tensor.h"
#include "rlx/thread_pool.h"
#include "rlx/version.h"
