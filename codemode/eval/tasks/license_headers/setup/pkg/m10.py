# SPDX-License-Identifier: MIT
import os

NAME_10 = 'm10'
